//! Differential tests against CPython's own `marshal` module (tests/marshal_oracle.py), in both
//! directions: values python3 dumps must decode to what python3 says they are and re-encode to
//! the same bytes; values we build in canonical forms must encode to exactly what
//! `marshal.dumps(value, 2)` writes after python3 has loaded them.

use std::collections::HashSet;

use crawlfleet_core::marshal::json::{from_json, to_json};
use crawlfleet_core::marshal::{self, BigInt, Limits, StrForm, Value};
use serde_json::{json, Value as Json};

use crate::util::{hex, python3, unhex};

const ORACLE: &str = include_str!("marshal_oracle.py");

/// Values compared in each direction.
const COUNT: usize = 10_000;

/// The typed description marshal_oracle.py prints for a Python value.
fn describe(v: &Value<'_>) -> Json {
    let tagged = |kind: &str, xs: &mut dyn Iterator<Item = &Value<'_>>| {
        Json::Array(
            std::iter::once(json!(kind))
                .chain(xs.map(describe))
                .collect(),
        )
    };
    match v {
        Value::None => json!(["none"]),
        Value::Bool(b) => json!(["bool", b]),
        Value::Int(i, _) => json!(["int", i.to_string()]),
        Value::BigInt(b) => json!(["int", b.to_string()]),
        Value::Float(_) | Value::FloatText(_) => {
            let f = v.as_f64().expect("a float");
            json!(["float", format!("{:016x}", f.to_bits())])
        }
        Value::Bytes(b, StrForm::Unicode) => json!(["str", hex(b)]),
        Value::Bytes(b, _) => json!(["bytes", hex(b)]),
        Value::Tuple(xs) => tagged("tuple", &mut xs.iter()),
        Value::List(xs) => tagged("list", &mut xs.iter()),
        Value::Set(xs) => tagged("set", &mut xs.iter()),
        Value::FrozenSet(xs) => tagged("frozenset", &mut xs.iter()),
        Value::Dict(pairs) => tagged("dict", &mut pairs.iter().flat_map(|(k, v)| [k, v])),
    }
}

/// A description with the items of every set sorted, since a set's wire order is not defined.
fn normalized(d: &Json) -> Json {
    let Some([kind, items @ ..]) = d.as_array().map(Vec::as_slice) else {
        return d.clone();
    };
    let mut items: Vec<Json> = items.iter().map(normalized).collect();
    if matches!(kind.as_str(), Some("set" | "frozenset")) {
        items.sort_by_cached_key(|x| x.to_string());
    }
    Json::Array(std::iter::once(kind.clone()).chain(items).collect())
}

/// One answer line of the oracle.
struct Answer {
    bytes: Vec<u8>,
    desc: Json,
    repr: Option<String>,
}

fn answers(stdout: &str) -> Vec<Answer> {
    stdout
        .lines()
        .map(|line| {
            let j: Json = serde_json::from_str(line).expect("oracle prints JSON lines");
            assert!(j.get("error").is_none(), "python3 refused a value: {line}");
            Answer {
                bytes: unhex(j["hex"].as_str().expect("hex")),
                desc: j["desc"].clone(),
                repr: j["repr"].as_str().map(str::to_owned),
            }
        })
        .collect()
}

/// Every check a value python3 dumped must pass; the first failure, described.
fn check_against_python(bytes: &[u8], desc: &Json, repr: Option<&str>) -> Result<(), String> {
    let limits = Limits::default();
    let v = marshal::from_bytes(bytes, &limits).map_err(|e| format!("from_bytes: {e}"))?;
    marshal::scan(bytes, &limits).map_err(|e| format!("scan: {e}"))?;
    if normalized(&describe(&v)) != normalized(desc) {
        return Err(format!(
            "describe: decoded as {}, python3 says {desc}",
            describe(&v)
        ));
    }
    let again = marshal::to_bytes(&v);
    if again != bytes {
        return Err(format!("encode: re-encoded as {}", hex(&again)));
    }
    // Through the JSON text, as `crawlfleet inspect` and `--encode` carry it.
    let text = to_json(&v).to_string();
    let parsed: Json = serde_json::from_str(&text).map_err(|e| format!("json: parse: {e}"))?;
    let via_json = from_json(&parsed).map_err(|e| format!("json: from_json: {e}"))?;
    let again = marshal::to_bytes(&via_json);
    if again != bytes {
        return Err(format!("json: gives {}", hex(&again)));
    }
    if let Some(repr) = repr {
        if v.py_repr() != repr {
            return Err(format!(
                "repr: py_repr {} but python3 repr {repr}",
                v.py_repr()
            ));
        }
    }
    Ok(())
}

fn fail_with(failures: &[String], total: usize) {
    let shown: Vec<String> = failures
        .iter()
        .take(10)
        .map(|f| f.chars().take(600).collect())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {total} values differ from python3; first ones:\n{}",
        failures.len(),
        shown.join("\n")
    );
}

#[test]
fn values_dumped_by_python_decode_and_reencode_identically() {
    let seed = "20240611";
    let count = COUNT.to_string();
    let out = python3(ORACLE, &["gen", seed, &count], b"");
    let all = answers(&out);
    assert_eq!(all.len(), COUNT);
    let mut failures = Vec::new();
    let mut sets = 0;
    for a in &all {
        let text = a.desc.to_string();
        sets += usize::from(text.contains("set\""));
        if let Err(why) = check_against_python(&a.bytes, &a.desc, a.repr.as_deref()) {
            failures.push(format!("{why} <- {}", hex(&a.bytes)));
        }
    }
    fail_with(&failures, all.len());
    assert!(
        sets > COUNT / 20,
        "the generator made only {sets} values with sets"
    );
    println!(
        "python3 -> crawlfleet: {} values compared (seed {seed})",
        all.len()
    );
}

/// Random values in the canonical forms `marshal.dumps(value, 2)` writes (no sets: their wire
/// order after a round trip through python3 is python3's own).
struct Gen {
    rng: fastrand::Rng,
}

impl Gen {
    fn int(&mut self) -> Value<'static> {
        let r = &mut self.rng;
        let v = match r.u8(0..6) {
            0 => r.i64(-10..300),
            1 => *r
                .choice(&[
                    i32::MAX.into(),
                    i32::MIN.into(),
                    i64::from(i32::MAX) + 1,
                    i64::from(i32::MIN) - 1,
                    i64::MAX,
                    i64::MIN,
                    1 << 15,
                    -(1 << 45),
                    (1 << 60) - 1,
                ])
                .expect("not empty"),
            2 => r.i32(..).into(),
            3 => r.i64(..),
            4 => r.i64(..) >> r.u32(1..63),
            _ => return self.big(),
        };
        Value::int(v)
    }

    /// An integer beyond `i64`: 5 to 30 digits of 15 bits, the top one large enough.
    fn big(&mut self) -> Value<'static> {
        let r = &mut self.rng;
        let n = r.usize(5..=30);
        let mut digits: Vec<u16> = (0..n).map(|_| r.u16(0..1 << 15)).collect();
        digits[n - 1] = r.u16(16..1 << 15); // >= 2^64 in magnitude
        Value::BigInt(Box::new(BigInt::from_digits(r.bool(), digits)))
    }

    fn float(&mut self) -> f64 {
        let r = &mut self.rng;
        match r.u8(0..5) {
            0 => *r
                .choice(&[
                    0.0,
                    -0.0,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NAN,
                    f64::MIN_POSITIVE,
                    -f64::from_bits(1),
                    f64::MAX,
                    0.1,
                    1e16,
                    1e-5,
                ])
                .expect("not empty"),
            1 => f64::from_bits(r.u64(..)),
            2 => f64::from_bits(r.u64(..1 << 52) | u64::from(r.bool()) << 63), // subnormal
            3 => r.i32(-1_000_000..1_000_000).into(),
            _ => (r.f64() - 0.5) * 10f64.powi(r.i32(-30..30)),
        }
    }

    fn bytes(&mut self) -> Vec<u8> {
        let r = &mut self.rng;
        let n = if r.u8(0..50) == 0 {
            r.usize(100..2000)
        } else {
            r.usize(0..40)
        };
        if r.bool() {
            (0..n).map(|_| r.u8(..)).collect()
        } else {
            let pool = b"abcXYZ019 '\"\\\t\n\r\x00\x7f/.:-";
            (0..n).map(|_| pool[r.usize(..pool.len())]).collect()
        }
    }

    fn text(&mut self) -> String {
        let r = &mut self.rng;
        let n = r.usize(0..20);
        let pools = [
            0x20..=0x7e,
            0..=0xff,
            0x100..=0x7ff,
            0x800..=0xffff,
            0x1_0000..=0x10_ffff,
            0x1_f600..=0x1_f64f,
        ];
        let mut s = String::new();
        while s.chars().count() < n {
            let pool = &pools[r.usize(..pools.len())];
            // Surrogates are no `char`: draw again.
            if let Some(c) = char::from_u32(r.u32(pool.clone())) {
                s.push(c);
            }
        }
        s
    }

    fn scalar(&mut self) -> Value<'static> {
        match self.rng.u8(0..10) {
            0 => match self.rng.u8(0..3) {
                0 => Value::None,
                b => Value::Bool(b == 1),
            },
            1 | 2 => self.int(),
            3 => Value::Float(self.float()),
            4..=6 => Value::owned_bytes(self.bytes()),
            _ => Value::Bytes(self.text().into_bytes().into(), StrForm::Unicode),
        }
    }

    /// A dict key python3 will keep as a distinct key: None, an int, a byte string or a str
    /// (no bools or floats, which python3 would merge with equal ints).
    fn key(&mut self) -> Value<'static> {
        loop {
            let k = self.scalar();
            if !matches!(k, Value::Bool(_) | Value::Float(_)) {
                return k;
            }
        }
    }

    fn dict(
        &mut self,
        n: usize,
        mut value: impl FnMut(&mut Self) -> Value<'static>,
    ) -> Value<'static> {
        let mut seen = HashSet::new();
        let mut pairs = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.key();
            if seen.insert(describe(&k).to_string()) {
                let v = value(self);
                pairs.push((k, v));
            }
        }
        Value::Dict(pairs)
    }

    fn value(&mut self, depth: usize, budget: &mut i32) -> Value<'static> {
        *budget -= 1;
        if depth >= 6 || *budget <= 0 || self.rng.f32() < 0.45 {
            return self.scalar();
        }
        let n = *self.rng.choice(&[0, 1, 2, 3, 4, 6, 9]).expect("not empty");
        let mut items = |g: &mut Self| -> Vec<Value<'static>> {
            (0..n).map(|_| g.value(depth + 1, budget)).collect()
        };
        match self.rng.u8(0..4) {
            0 => Value::Tuple(items(self)),
            1 => Value::List(items(self)),
            _ => {
                let mut budget_here = *budget;
                let d = self.dict(n, |g| g.value(depth + 1, &mut budget_here));
                *budget = budget_here;
                d
            }
        }
    }

    /// A chain of 56 to 64 containers: up to crawlfleet's default depth limit.
    fn deep(&mut self) -> Value<'static> {
        let depth = self.rng.usize(56..=64);
        let mut v = self.scalar();
        for _ in 0..depth {
            v = match self.rng.u8(0..3) {
                0 => Value::Tuple(vec![v]),
                1 => Value::List(vec![v, self.scalar()]),
                _ => {
                    let k = self.key();
                    Value::Dict(vec![(k, v)])
                }
            };
        }
        v
    }

    fn top(&mut self) -> Value<'static> {
        let roll = self.rng.f32();
        if roll < 0.03 {
            self.deep()
        } else if roll < 0.18 {
            self.scalar()
        } else {
            let mut budget = self.rng.i32(5..60);
            self.value(0, &mut budget)
        }
    }
}

#[test]
fn values_encoded_here_are_what_python_dumps() {
    let seed = 0x5eed_2024;
    let mut g = Gen {
        rng: fastrand::Rng::with_seed(seed),
    };
    let values: Vec<Value<'static>> = (0..COUNT).map(|_| g.top()).collect();
    let encoded: Vec<Vec<u8>> = values.iter().map(marshal::to_bytes).collect();
    let mut input = String::new();
    for e in &encoded {
        input.push_str(&hex(e));
        input.push('\n');
    }
    let out = python3(ORACLE, &["check"], input.as_bytes());
    let all = answers(&out);
    assert_eq!(all.len(), COUNT);

    let mut failures = Vec::new();
    for ((v, ours), theirs) in values.iter().zip(&encoded).zip(&all) {
        let mut why = Vec::new();
        if theirs.bytes != *ours {
            why.push(format!("python3 re-dumps it as {}", hex(&theirs.bytes)));
        }
        if normalized(&describe(v)) != normalized(&theirs.desc) {
            why.push(format!("python3 reads it as {}", theirs.desc));
        }
        if let Some(repr) = &theirs.repr {
            if &v.py_repr() != repr {
                why.push(format!("py_repr {} but python3 repr {repr}", v.py_repr()));
            }
        }
        // And our own decoder reads back what we wrote.
        if let Err(e) = check_against_python(ours, &describe(v), None) {
            why.push(e);
        }
        if !why.is_empty() {
            failures.push(format!("{} <- {}", why.join("; "), hex(ours)));
        }
    }
    fail_with(&failures, all.len());
    println!(
        "crawlfleet -> python3: {} values compared (seed {seed:#x})",
        all.len()
    );
}

/// The `py_repr` of the marshal value `input` (hex).
fn repr_of(input: &str) -> String {
    let bytes = unhex(input);
    marshal::from_bytes(&bytes, &Limits::default())
        .expect("valid marshal")
        .py_repr()
}

/// Reads `input` as marshal, writes its JSON text, reads that back and encodes it again.
fn via_json_text(input: &[u8]) -> Vec<u8> {
    let v = marshal::from_bytes(input, &Limits::default()).expect("valid marshal");
    let text = to_json(&v).to_string();
    let parsed: Json = serde_json::from_str(&text).expect("to_json gives valid JSON");
    marshal::to_bytes(&from_json(&parsed).expect("from_json reads what to_json wrote"))
}

// Regression: without serde_json's `float_roundtrip` feature, reading JSON text back may land one
// ULP off (here 0x3c7cd0df63525733 became ...34); marshal/json.rs promises a lossless form.
#[test]
fn json_text_keeps_every_float_bit() {
    assert_eq!(
        hex(&via_json_text(&unhex("6733575263dfd07c3c"))),
        "6733575263dfd07c3c"
    );
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..10_000 {
        let mut g = vec![b'g'];
        g.extend_from_slice(&rng.u64(..).to_le_bytes());
        assert_eq!(hex(&via_json_text(&g)), hex(&g));
    }
}

// Regression: 654679116886808.25 is halfway between ...808.2 and ...808.3; Python's repr
// (David Gay's shortest mode) rounds half to even.
#[test]
fn float_repr_rounds_ties_like_python() {
    assert_eq!(repr_of("67c298a1e16a9b0243"), "654679116886808.2");
}

// Regression: Python's str repr escapes what it does not print (U+00AD soft hyphen, U+2028).
#[test]
fn str_repr_escapes_non_printable_like_python() {
    assert_eq!(repr_of("7502000000c2ad"), r"'\xad'");
}
