//! Python's `repr()` of a decoded value, as the golden wire vectors print it.

use std::fmt::Write;

use super::{StrForm, Value};

pub(super) fn write_repr(v: &Value<'_>, out: &mut String) {
    match v {
        Value::None => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(i, _) => {
            let _ = write!(out, "{i}");
        }
        Value::BigInt(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Float(_) | Value::FloatText(_) => write_float(v.as_f64().unwrap_or(f64::NAN), out),
        Value::Bytes(b, StrForm::Unicode) => match std::str::from_utf8(b) {
            Ok(s) => write_str_repr(s, out),
            Err(_) => write_bytes_repr(b, out),
        },
        Value::Bytes(b, _) => write_bytes_repr(b, out),
        Value::Tuple(items) => {
            out.push('(');
            write_items(items, out);
            if items.len() == 1 {
                out.push(',');
            }
            out.push(')');
        }
        Value::List(items) => {
            out.push('[');
            write_items(items, out);
            out.push(']');
        }
        Value::Set(items) if items.is_empty() => out.push_str("set()"),
        Value::Set(items) => {
            out.push('{');
            write_items(items, out);
            out.push('}');
        }
        Value::FrozenSet(items) if items.is_empty() => out.push_str("frozenset()"),
        Value::FrozenSet(items) => {
            out.push_str("frozenset({");
            write_items(items, out);
            out.push_str("})");
        }
        Value::Dict(pairs) => {
            out.push('{');
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(k, out);
                out.push_str(": ");
                write_repr(v, out);
            }
            out.push('}');
        }
    }
}

fn write_items(items: &[Value<'_>], out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_repr(item, out);
    }
}

/// Python's float repr: the shortest digits that round-trip, positional for exponents in
/// [-4, 16), scientific (`1e+16`) otherwise.
fn write_float(f: f64, out: &mut String) {
    if f.is_nan() {
        out.push_str("nan");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "inf" } else { "-inf" });
        return;
    }
    // `{:e}` gives the shortest digit count that round-trips; formatting again with exactly
    // that many digits rounds the exact value half-to-even, which is how Python picks between
    // two equally short candidates.
    let shortest = format!("{f:e}");
    let digits_len = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.chars().filter(char::is_ascii_digit).count());
    let sci = format!("{:.*e}", digits_len.saturating_sub(1), f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    out.push_str(sign);
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let point = exp as usize + 1;
            if digits.len() <= point {
                out.push_str(&digits);
                for _ in digits.len()..point {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

fn quote_for(has_single: bool, has_double: bool) -> char {
    if has_single && !has_double {
        '"'
    } else {
        '\''
    }
}

fn write_bytes_repr(b: &[u8], out: &mut String) {
    let q = quote_for(b.contains(&b'\''), b.contains(&b'"'));
    out.push('b');
    out.push(q);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            c if c == q as u8 => {
                out.push('\\');
                out.push(q);
            }
            0x20..=0x7e => out.push(c as char),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(q);
}

fn write_str_repr(s: &str, out: &mut String) {
    let q = quote_for(s.contains('\''), s.contains('"'));
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(q);
            }
            c if !py_printable(c) => {
                let n = c as u32;
                let _ = match n {
                    0..=0xff => write!(out, "\\x{n:02x}"),
                    0x100..=0xffff => write!(out, "\\u{n:04x}"),
                    _ => write!(out, "\\U{n:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

/// Python's `str.isprintable()` for one character, over the categories it rejects that can be
/// told without Unicode tables: controls (Cc), separators other than the ASCII space (Zs, Zl,
/// Zp), the common format characters (Cf), private use (Co) and noncharacters. Unassigned code
/// points (Cn) are printed as they are.
fn py_printable(c: char) -> bool {
    let n = c as u32;
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(
            n,
            0xa0 | 0xad
                | 0x600..=0x605
                | 0x61c
                | 0x6dd
                | 0x70f
                | 0x1680
                | 0x180e
                | 0x2000..=0x200f
                | 0x2028..=0x202f
                | 0x205f..=0x2064
                | 0x2066..=0x206f
                | 0x3000
                | 0xfeff
                | 0xfff9..=0xfffb
                | 0xe000..=0xf8ff
                | 0xf0000..=0x10ffff
                | 0x110bd
                | 0x1d173..=0x1d17a
                | 0xe0001
                | 0xe0020..=0xe007f
        )
        || (n & 0xfffe) == 0xfffe
        || (0xfdd0..=0xfdef).contains(&n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> String {
        let mut s = String::new();
        write_float(x, &mut s);
        s
    }

    #[test]
    fn floats_print_like_python() {
        assert_eq!(f(0.25), "0.25");
        assert_eq!(f(0.1), "0.1");
        assert_eq!(f(1.0), "1.0");
        assert_eq!(f(-2.5), "-2.5");
        assert_eq!(f(1e16), "1e+16");
        assert_eq!(f(1.5e16), "1.5e+16");
        assert_eq!(f(123456789012345.0), "123456789012345.0");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f(0.00001), "1e-05");
        assert_eq!(f(-0.0), "-0.0");
        assert_eq!(f(f64::INFINITY), "inf");
        // An exact tie between two shortest candidates: Python rounds half to even.
        assert_eq!(f(f64::from_bits(0x43029b6ae1a198c2)), "654679116886808.2");
    }

    #[test]
    fn bytes_print_like_python() {
        let mut s = String::new();
        write_bytes_repr(b"a'b\x00\xff\\", &mut s);
        assert_eq!(s, r#"b"a'b\x00\xff\\""#);
    }
}
