//! Encoding [`Value`]s as marshal bytes.
//!
//! Canonical forms give exactly what CPython's `marshal.dumps(value, 2)` writes; the other forms
//! ([`IntForm`], [`StrForm`], [`Value::FloatText`]) reproduce the bytes a value was decoded from.

use super::{tag, BigInt, IntForm, StrForm, Value};

/// Encodes `v` into a new buffer.
pub fn to_bytes(v: &Value<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    encode_into(v, &mut out);
    out
}

/// Appends the encoding of `v` to `out`.
pub fn encode_into(v: &Value<'_>, out: &mut Vec<u8>) {
    match v {
        Value::None => out.push(tag::NONE),
        Value::Bool(true) => out.push(tag::TRUE),
        Value::Bool(false) => out.push(tag::FALSE),
        Value::Int(i, form) => encode_int(*i, *form, out),
        Value::BigInt(b) => encode_bigint(b, out),
        Value::Float(f) => {
            out.push(tag::BINARY_FLOAT);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::FloatText(text) => match u8::try_from(text.len()) {
            Ok(n) => {
                out.push(tag::FLOAT);
                out.push(n);
                out.extend_from_slice(text);
            }
            // Longer text cannot be an 'f'; the decoder never produces it, so a value built in
            // code that has it is written as the binary float it denotes.
            Err(_) => encode_into(&Value::Float(v.as_f64().unwrap_or(f64::NAN)), out),
        },
        Value::Bytes(b, form) => match form {
            StrForm::Ref(i) => {
                out.push(tag::STRINGREF);
                out.extend_from_slice(&i.to_le_bytes());
            }
            _ => {
                out.push(match form {
                    StrForm::Interned => tag::INTERNED,
                    StrForm::Unicode => tag::UNICODE,
                    _ => tag::STRING,
                });
                write_len(b.len(), out);
                out.extend_from_slice(b);
            }
        },
        Value::Tuple(items) => encode_seq(tag::TUPLE, items, out),
        Value::List(items) => encode_seq(tag::LIST, items, out),
        Value::Set(items) => encode_seq(tag::SET, items, out),
        Value::FrozenSet(items) => encode_seq(tag::FROZENSET, items, out),
        Value::Dict(pairs) => {
            out.push(tag::DICT);
            for (k, v) in pairs {
                encode_into(k, out);
                encode_into(v, out);
            }
            out.push(tag::NULL);
        }
    }
}

#[inline]
fn write_len(n: usize, out: &mut Vec<u8>) {
    // Lengths beyond i32 cannot be represented by the format; nothing we decode or build in a
    // frame (64 MiB at most) comes near.
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn encode_seq(t: u8, items: &[Value<'_>], out: &mut Vec<u8>) {
    out.push(t);
    write_len(items.len(), out);
    for item in items {
        encode_into(item, out);
    }
}

#[inline]
fn encode_int(v: i64, form: IntForm, out: &mut Vec<u8>) {
    match form {
        IntForm::Auto if i32::try_from(v).is_ok() => {
            out.push(tag::INT);
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        IntForm::Int64 => {
            out.push(tag::INT64);
            out.extend_from_slice(&v.to_le_bytes());
        }
        IntForm::Auto | IntForm::Long => {
            out.push(tag::LONG);
            let mut mag = v.unsigned_abs();
            let mut digits = [0u16; 5];
            let mut n = 0;
            while mag != 0 {
                digits[n] = (mag & 0x7fff) as u16;
                mag >>= 15;
                n += 1;
            }
            let size = if v < 0 { -(n as i32) } else { n as i32 };
            out.extend_from_slice(&size.to_le_bytes());
            for d in &digits[..n] {
                out.extend_from_slice(&d.to_le_bytes());
            }
        }
    }
}

fn encode_bigint(b: &BigInt, out: &mut Vec<u8>) {
    out.push(tag::LONG);
    let n = b.digits().len() as i32;
    let size = if b.is_negative() { -n } else { n };
    out.extend_from_slice(&size.to_le_bytes());
    for d in b.digits() {
        out.extend_from_slice(&d.to_le_bytes());
    }
}
