//! Integers beyond `i64`, kept as the marshal format carries them: a sign and 15-bit digits.

use std::fmt;

/// An `'l'` integer outside the `i64` range: sign and magnitude in base 2^15, least significant
/// digit first, normalized (no zero top digit).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BigInt {
    negative: bool,
    digits: Vec<u16>,
}

impl BigInt {
    /// From a sign and base-2^15 digits (least significant first). Zero top digits are dropped.
    pub fn from_digits(negative: bool, mut digits: Vec<u16>) -> Self {
        while digits.last() == Some(&0) {
            digits.pop();
        }
        let negative = negative && !digits.is_empty();
        BigInt { negative, digits }
    }

    /// Parses an optionally signed decimal integer.
    pub fn parse_decimal(s: &str) -> Option<Self> {
        let (negative, body) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut digits: Vec<u16> = Vec::new();
        for b in body.bytes() {
            // digits = digits * 10 + (b - '0'), in base 2^15.
            let mut carry = u32::from(b - b'0');
            for d in digits.iter_mut() {
                let x = u32::from(*d) * 10 + carry;
                *d = (x & 0x7fff) as u16;
                carry = x >> 15;
            }
            while carry > 0 {
                digits.push((carry & 0x7fff) as u16);
                carry >>= 15;
            }
        }
        Some(Self::from_digits(negative, digits))
    }

    /// True when the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The base-2^15 digits of the magnitude, least significant first.
    pub fn digits(&self) -> &[u16] {
        &self.digits
    }
}

impl fmt::Display for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.digits.is_empty() {
            return f.write_str("0");
        }
        // Repeated division of the magnitude by 10^4, collecting base-10^4 chunks.
        let mut mag: Vec<u32> = self.digits.iter().map(|&d| u32::from(d)).collect();
        let mut chunks = Vec::new();
        while !mag.is_empty() {
            let mut rem = 0u32;
            for d in mag.iter_mut().rev() {
                let x = (rem << 15) | *d;
                *d = x / 10_000;
                rem = x % 10_000;
            }
            chunks.push(rem);
            while mag.last() == Some(&0) {
                mag.pop();
            }
        }
        let mut s = String::with_capacity(chunks.len() * 4 + 1);
        if self.negative {
            s.push('-');
        }
        let mut iter = chunks.iter().rev();
        if let Some(first) = iter.next() {
            s.push_str(&first.to_string());
        }
        for c in iter {
            s.push_str(&format!("{c:04}"));
        }
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trip() {
        for s in [
            "0",
            "1",
            "-1",
            "32768",
            "9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890123456789",
        ] {
            assert_eq!(BigInt::parse_decimal(s).unwrap().to_string(), s);
        }
        assert_eq!(BigInt::parse_decimal("-0").unwrap().to_string(), "0");
        assert!(BigInt::parse_decimal("12a").is_none());
        assert!(BigInt::parse_decimal("").is_none());
    }

    #[test]
    fn digits_are_base_two_to_the_fifteen() {
        // 2^40 = digits [0, 0, 1024].
        let b = BigInt::parse_decimal("1099511627776").unwrap();
        assert_eq!(b.digits(), &[0, 0, 1024]);
    }
}
