//! Decoding marshal bytes into [`Value`]s, and scanning them without building values.
//!
//! Every declared length is checked against the bytes left before anything is allocated, nesting
//! is bounded, and every failure is a [`DecodeError`] naming the byte offset where it happened.
//! [`scan`] walks the same grammar with the same checks but builds no values (it allocates only
//! the reference table, and only when the input has interned strings): the event loop uses
//! it to refuse a bad frame before handing the bytes on, and `scan(b).is_ok() ==
//! from_bytes(b).is_ok()` holds for every input (the fuzz target asserts it).

use std::borrow::Cow;
use std::fmt;

use super::{tag, BigInt, Dict, IntForm, StrForm, Value};

/// Bounds applied while decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum nesting of containers (a bare scalar is depth 0; `(1,)` is depth 1).
    pub max_depth: usize,
    /// Maximum size of one input (for frames: of the body after the length header).
    pub max_size: usize,
}

impl Limits {
    /// Default maximum nesting depth.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
    /// Default maximum input size: 64 MiB.
    pub const DEFAULT_MAX_SIZE: usize = 64 << 20;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_size: Self::DEFAULT_MAX_SIZE,
        }
    }
}

/// What went wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset in the input where the failing item starts (or where bytes ran out).
    pub offset: usize,
    /// The failure.
    pub kind: DecodeErrorKind,
}

/// The ways marshal input can be wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The input ended inside an item; `needed` more bytes were required at least.
    Truncated {
        /// Bytes still needed.
        needed: usize,
    },
    /// A type code this format does not carry (code objects, complex numbers, ...).
    UnknownType(u8),
    /// A string or container length below zero.
    NegativeLength(i64),
    /// A declared length larger than the bytes left could possibly hold.
    LengthExceedsInput {
        /// The declared element or byte count.
        declared: u64,
        /// Bytes left in the input after the length field.
        left: usize,
    },
    /// Containers nested deeper than [`Limits::max_depth`].
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The whole input is larger than [`Limits::max_size`].
    TooLarge {
        /// The input size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// An `R` reference to an interned string that was not read yet.
    BadStringRef {
        /// The index read.
        index: i64,
        /// How many interned strings had been read.
        interned: usize,
    },
    /// An `f` float whose text is not a number.
    BadFloatText,
    /// An `l` integer whose most significant digit is zero.
    UnnormalizedLong,
    /// An `l` integer digit of 2^15 or more.
    LongDigitOutOfRange(u16),
    /// The dict terminator `0` where a value was expected.
    NullOutsideDict,
    /// Bytes left over after one complete value.
    TrailingBytes {
        /// How many.
        count: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "marshal data invalid at byte {}: ", self.offset)?;
        match &self.kind {
            DecodeErrorKind::Truncated { needed } => {
                write!(f, "input ends {needed} byte(s) too early")
            }
            DecodeErrorKind::UnknownType(t) if t.is_ascii_graphic() => {
                write!(f, "unknown type code 0x{t:02x} ('{}')", *t as char)
            }
            DecodeErrorKind::UnknownType(t) => write!(f, "unknown type code 0x{t:02x}"),
            DecodeErrorKind::NegativeLength(n) => write!(f, "negative length {n}"),
            DecodeErrorKind::LengthExceedsInput { declared, left } => {
                write!(
                    f,
                    "declared length {declared} exceeds the {left} byte(s) left"
                )
            }
            DecodeErrorKind::TooDeep { limit } => {
                write!(f, "containers nested deeper than {limit}")
            }
            DecodeErrorKind::TooLarge { size, limit } => {
                write!(f, "{size} bytes exceed the limit of {limit}")
            }
            DecodeErrorKind::BadStringRef { index, interned } => write!(
                f,
                "string reference {index} but only {interned} interned string(s) read"
            ),
            DecodeErrorKind::BadFloatText => write!(f, "float text is not a number"),
            DecodeErrorKind::UnnormalizedLong => write!(f, "long with a zero top digit"),
            DecodeErrorKind::LongDigitOutOfRange(d) => {
                write!(f, "long digit {d} is not below 32768")
            }
            DecodeErrorKind::NullOutsideDict => write!(f, "dict terminator outside a dict"),
            DecodeErrorKind::TrailingBytes { count } => {
                write!(f, "{count} byte(s) after the value")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes exactly one value filling all of `input`.
pub fn from_bytes<'a>(input: &'a [u8], limits: &Limits) -> Result<Value<'a>, DecodeError> {
    let mut d = Decoder::new(input, limits)?;
    let v = d.value()?;
    d.finish()?;
    Ok(v)
}

/// Checks that `input` is exactly one valid value, without building it.
pub fn scan(input: &[u8], limits: &Limits) -> Result<(), DecodeError> {
    let mut d = Decoder::new(input, limits)?;
    d.skip()?;
    d.finish()
}

/// Parses the text of an `'f'` float the way CPython's `PyOS_string_to_double` would accept it.
pub(crate) fn parse_float_text(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?;
    // Rust accepts the forms CPython writes: "1.5", "1e+16", "inf", "-inf", "nan".
    s.trim_matches(' ').parse::<f64>().ok()
}

/// Internal results carry the error boxed, so a `Result<Value>` is no larger than a `Value` and
/// moves through the recursion in registers and aligned words.
type R<T> = Result<T, Box<DecodeError>>;

/// A cursor over marshal input with the reference table of interned strings.
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    max_depth: usize,
    /// Interned (`t`) strings in the order read, for `R` references. [`Decoder::skip`] keeps
    /// them too, so a value decoded after a skipped one resolves its references the same way.
    interned: Vec<&'a [u8]>,
}

impl<'a> Decoder<'a> {
    /// A decoder over `input`, refusing it at once if it exceeds the size limit.
    pub fn new(input: &'a [u8], limits: &Limits) -> Result<Self, DecodeError> {
        if input.len() > limits.max_size {
            return Err(DecodeError {
                offset: 0,
                kind: DecodeErrorKind::TooLarge {
                    size: input.len(),
                    limit: limits.max_size,
                },
            });
        }
        Ok(Decoder {
            buf: input,
            pos: 0,
            max_depth: limits.max_depth,
            interned: Vec::new(),
        })
    }

    /// The current byte offset.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        let left = self.left();
        if left != 0 {
            return Err(*self.err_at(self.pos, DecodeErrorKind::TrailingBytes { count: left }));
        }
        Ok(())
    }

    /// Decodes one value.
    pub fn value(&mut self) -> Result<Value<'a>, DecodeError> {
        self.value_at_depth(0).map_err(|e| *e)
    }

    /// Passes over one value with every check of [`Decoder::value`], building nothing.
    pub fn skip(&mut self) -> Result<(), DecodeError> {
        self.skip_at_depth(0).map_err(|e| *e)
    }

    /// For an input that starts with a 2-tuple header: passes over the first element with every
    /// check and decodes the second, as decoding the whole tuple would (same depth accounting).
    pub(crate) fn pair_skip_first(&mut self) -> Result<Value<'a>, DecodeError> {
        let at = self.pos;
        let inner = |d: &mut Self| -> R<Value<'a>> {
            d.u8()?;
            let depth = d.enter(at, 0)?;
            d.length(1)?;
            d.skip_at_depth(depth)?;
            d.value_at_depth(depth)
        };
        inner(self).map_err(|e| *e)
    }

    /// For a frame body `(`, 2, `{`...: reads the dict's pairs into `out` when every key and
    /// value is a scalar and they fit, then the priority; `Ok(None)` sends the caller to the
    /// general decoder (a container inside, or too many pairs), which also reports errors.
    pub(crate) fn flat_frame<const N: usize>(
        &mut self,
        out: &mut arrayvec::ArrayVec<(Value<'a>, Value<'a>), N>,
    ) -> Result<Option<Value<'a>>, Box<DecodeError>> {
        let scalar = |t: u8| {
            !matches!(
                t,
                tag::TUPLE | tag::LIST | tag::DICT | tag::SET | tag::FROZENSET
            )
        };
        if self.max_depth < 2 || self.buf.get(..6) != Some(b"(\x02\x00\x00\x00{") {
            return Ok(None);
        }
        self.pos = 6;
        loop {
            match self.buf.get(self.pos) {
                Some(&tag::NULL) => {
                    self.pos += 1;
                    break;
                }
                Some(&t) if scalar(t) && !out.is_full() => {}
                _ => return Ok(None),
            }
            let k = self.element(2)?;
            match self.buf.get(self.pos) {
                Some(&t) if scalar(t) => {}
                _ => return Ok(None),
            }
            let v = self.element(2)?;
            out.push((k, v));
        }
        let priority = self.value_at_depth(1)?;
        if self.left() != 0 {
            return Ok(None);
        }
        Ok(Some(priority))
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[cold]
    fn err_at(&self, offset: usize, kind: DecodeErrorKind) -> Box<DecodeError> {
        Box::new(DecodeError { offset, kind })
    }

    #[inline]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let left = self.left();
        if n > left {
            return Err(self.err_at(
                self.buf.len(),
                DecodeErrorKind::Truncated { needed: n - left },
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn i32(&mut self) -> R<i32> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    fn i64(&mut self) -> R<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_le_bytes(a))
    }

    /// Reads a 4-byte length and checks it against the bytes left, `min_item` bytes per item.
    #[inline]
    fn length(&mut self, min_item: usize) -> R<usize> {
        let at = self.pos;
        let n = self.i32()?;
        if n < 0 {
            return Err(self.err_at(at, DecodeErrorKind::NegativeLength(n.into())));
        }
        let n = n as usize;
        let left = self.left();
        if n.saturating_mul(min_item) > left {
            return Err(self.err_at(
                at,
                DecodeErrorKind::LengthExceedsInput {
                    declared: n as u64,
                    left,
                },
            ));
        }
        Ok(n)
    }

    fn string_body(&mut self) -> R<&'a [u8]> {
        let n = self.length(1)?;
        self.take(n)
    }

    fn string_ref(&mut self, at: usize) -> R<u32> {
        let index = self.i32()?;
        if index < 0 || index as usize >= self.interned.len() {
            return Err(self.err_at(
                at,
                DecodeErrorKind::BadStringRef {
                    index: index.into(),
                    interned: self.interned.len(),
                },
            ));
        }
        Ok(index as u32)
    }

    fn float_text(&mut self, at: usize) -> R<&'a [u8]> {
        let n = self.u8()? as usize;
        let text = self.take(n)?;
        if parse_float_text(text).is_none() {
            return Err(self.err_at(at, DecodeErrorKind::BadFloatText));
        }
        Ok(text)
    }

    /// Reads the digits of an `'l'`, checked (normalized, each below 2^15), without building it.
    fn long_digits(&mut self, at: usize) -> R<(bool, &'a [u8])> {
        let n = self.i32()?;
        let count = n.unsigned_abs() as usize;
        let left = self.left();
        if count.saturating_mul(2) > left {
            return Err(self.err_at(
                at + 1,
                DecodeErrorKind::LengthExceedsInput {
                    declared: count as u64,
                    left,
                },
            ));
        }
        let raw = self.take(count * 2)?;
        for pair in raw.chunks_exact(2) {
            let d = u16::from_le_bytes([pair[0], pair[1]]);
            if d >= 1 << 15 {
                return Err(self.err_at(at, DecodeErrorKind::LongDigitOutOfRange(d)));
            }
        }
        if count > 0 && raw[2 * count - 2..] == [0, 0] {
            return Err(self.err_at(at, DecodeErrorKind::UnnormalizedLong));
        }
        Ok((n < 0, raw))
    }

    /// The value of checked `'l'` digits: an `Int` when it fits in `i64`, else a `BigInt`.
    fn long_value(negative: bool, raw: &[u8]) -> Value<'static> {
        let digit = |i: usize| u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]);
        let count = raw.len() / 2;
        // Up to four digits (60 bits) always fit in i64; five may, if the magnitude allows.
        if count <= 5 {
            let mut mag: u128 = 0;
            for i in (0..count).rev() {
                mag = (mag << 15) | u128::from(digit(i));
            }
            let v = if negative {
                (mag <= 1u128 << 63).then(|| (mag as i128).wrapping_neg() as i64)
            } else {
                (mag <= i64::MAX as u128).then_some(mag as i64)
            };
            if let Some(v) = v {
                // An 'l' that canonical encoding would also write as 'l' stays Auto.
                let form = if i32::try_from(v).is_ok() {
                    IntForm::Long
                } else {
                    IntForm::Auto
                };
                return Value::Int(v, form);
            }
        }
        Value::BigInt(Box::new(BigInt::from_digits(
            negative,
            (0..count).map(digit).collect(),
        )))
    }

    fn enter(&self, at: usize, depth: usize) -> R<usize> {
        if depth >= self.max_depth {
            return Err(self.err_at(
                at,
                DecodeErrorKind::TooDeep {
                    limit: self.max_depth,
                },
            ));
        }
        Ok(depth + 1)
    }

    /// One element of a container: plain strings and 32-bit integers (most of what FSCMT frames
    /// carry) are read inline, everything else through [`Self::value_at_depth`].
    #[inline(always)]
    fn element(&mut self, depth: usize) -> R<Value<'a>> {
        match self.buf.get(self.pos) {
            Some(&tag::STRING) => {
                self.pos += 1;
                Ok(Value::Bytes(
                    Cow::Borrowed(self.string_body()?),
                    StrForm::Plain,
                ))
            }
            Some(&tag::INT) => {
                self.pos += 1;
                Ok(Value::Int(self.i32()?.into(), IntForm::Auto))
            }
            _ => self.value_at_depth(depth),
        }
    }

    fn value_at_depth(&mut self, depth: usize) -> R<Value<'a>> {
        let at = self.pos;
        let t = self.u8()?;
        Ok(match t {
            tag::NONE => Value::None,
            tag::TRUE => Value::Bool(true),
            tag::FALSE => Value::Bool(false),
            tag::INT => Value::Int(self.i32()?.into(), IntForm::Auto),
            tag::INT64 => Value::Int(self.i64()?, IntForm::Int64),
            tag::LONG => {
                let (negative, raw) = self.long_digits(at)?;
                Self::long_value(negative, raw)
            }
            tag::BINARY_FLOAT => Value::Float(f64::from_bits(self.i64()? as u64)),
            tag::FLOAT => Value::FloatText(Cow::Borrowed(self.float_text(at)?)),
            tag::STRING => Value::Bytes(Cow::Borrowed(self.string_body()?), StrForm::Plain),
            tag::UNICODE => Value::Bytes(Cow::Borrowed(self.string_body()?), StrForm::Unicode),
            tag::INTERNED => {
                let s = self.string_body()?;
                self.interned.push(s);
                Value::Bytes(Cow::Borrowed(s), StrForm::Interned)
            }
            tag::STRINGREF => {
                let i = self.string_ref(at)?;
                Value::Bytes(Cow::Borrowed(self.interned[i as usize]), StrForm::Ref(i))
            }
            tag::TUPLE | tag::LIST | tag::SET | tag::FROZENSET => {
                let depth = self.enter(at, depth)?;
                let n = self.length(1)?;
                // Grow with the items actually read: a declared count only bounds them.
                let mut items = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    items.push(self.element(depth)?);
                }
                match t {
                    tag::TUPLE => Value::Tuple(items),
                    tag::LIST => Value::List(items),
                    tag::SET => Value::Set(items),
                    _ => Value::FrozenSet(items),
                }
            }
            tag::DICT => {
                let depth = self.enter(at, depth)?;
                let mut pairs: Dict<'a> = Vec::with_capacity(8);
                loop {
                    if self.buf.get(self.pos) == Some(&tag::NULL) {
                        self.pos += 1;
                        break;
                    }
                    let k = self.element(depth)?;
                    let v = self.element(depth)?;
                    pairs.push((k, v));
                }
                Value::Dict(pairs)
            }
            tag::NULL => return Err(self.err_at(at, DecodeErrorKind::NullOutsideDict)),
            other => return Err(self.err_at(at, DecodeErrorKind::UnknownType(other))),
        })
    }

    fn skip_at_depth(&mut self, depth: usize) -> R<()> {
        let at = self.pos;
        let t = self.u8()?;
        match t {
            tag::NONE | tag::TRUE | tag::FALSE => {}
            tag::INT => {
                self.take(4)?;
            }
            tag::INT64 | tag::BINARY_FLOAT => {
                self.take(8)?;
            }
            tag::LONG => {
                self.long_digits(at)?;
            }
            tag::FLOAT => {
                self.float_text(at)?;
            }
            tag::STRING | tag::UNICODE => {
                self.string_body()?;
            }
            tag::INTERNED => {
                let s = self.string_body()?;
                self.interned.push(s);
            }
            tag::STRINGREF => {
                self.string_ref(at)?;
            }
            tag::TUPLE | tag::LIST | tag::SET | tag::FROZENSET => {
                let depth = self.enter(at, depth)?;
                let n = self.length(1)?;
                for _ in 0..n {
                    self.skip_at_depth(depth)?;
                }
            }
            tag::DICT => {
                let depth = self.enter(at, depth)?;
                loop {
                    if self.buf.get(self.pos) == Some(&tag::NULL) {
                        self.pos += 1;
                        break;
                    }
                    self.skip_at_depth(depth)?;
                    self.skip_at_depth(depth)?;
                }
            }
            tag::NULL => return Err(self.err_at(at, DecodeErrorKind::NullOutsideDict)),
            other => return Err(self.err_at(at, DecodeErrorKind::UnknownType(other))),
        }
        Ok(())
    }
}
