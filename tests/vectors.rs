//! The golden wire vectors (`tests/data/wire-vectors.tsv`, a byte-identical copy of `shared/vectors/`): each decodes to the value its
//! third column prints, re-encodes byte for byte, passes `scan` / `scan_body`, and survives the
//! JSON form unchanged.

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::json::{from_json, to_json};
use crawlfleet_core::marshal::{self, IntForm, Limits, Value};

use crate::util::{hex, vector, vectors, Framing, Vector, WASDR_TERMINATOR};

/// The marshal value re-encoded through its JSON text must give the same bytes, and the JSON text
/// of the value read back must be the same text.
fn assert_json_round_trip(name: &str, v: &Value<'_>, marshal_bytes: &[u8]) {
    let text = to_json(v).to_string();
    let parsed: serde_json::Value = serde_json::from_str(&text).expect("to_json gives valid JSON");
    let back = from_json(&parsed).unwrap_or_else(|e| panic!("{name}: from_json({text}): {e}"));
    assert_eq!(
        hex(&marshal::to_bytes(&back)),
        hex(marshal_bytes),
        "{name}: JSON {text}"
    );
    assert_eq!(
        to_json(&back).to_string(),
        text,
        "{name}: JSON text changed"
    );
}

/// MS-FSCMT 2.2.1: a frame is a 4-byte big-endian length and a marshal `(dict, priority)`.
fn check_fscmt(v: &Vector) {
    let limits = Limits::default();
    let (body, consumed) = frame::split(&v.wire, &limits)
        .unwrap_or_else(|e| panic!("{}: split: {e}", v.name))
        .unwrap_or_else(|| panic!("{}: split wants more bytes", v.name));
    assert_eq!(consumed, v.wire.len(), "{}: one whole frame", v.name);
    assert_eq!(body, v.marshal(), "{}", v.name);
    // The notes state the length header for the frames the spec prints ("length 85").
    if let Some(len) = v.note.split("length ").nth(1) {
        let len: usize = len.trim().parse().expect("length in the note");
        assert_eq!(body.len(), len, "{}: length header", v.name);
    }

    let f = frame::decode_body(body, &limits).unwrap_or_else(|e| panic!("{}: {e}", v.name));
    let as_tuple = Value::tuple(vec![
        Value::Dict(f.message.clone()),
        Value::Int(f.priority.as_i64(), IntForm::Auto),
    ]);
    assert_eq!(as_tuple.py_repr(), v.repr, "{}: decode_body", v.name);
    assert_eq!(
        frame::scan_body(body, &limits),
        Ok(f.priority),
        "{}",
        v.name
    );

    let whole = marshal::from_bytes(body, &limits).unwrap_or_else(|e| panic!("{}: {e}", v.name));
    assert_eq!(whole, as_tuple, "{}: from_bytes and decode_body", v.name);
    assert_eq!(marshal::scan(body, &limits), Ok(()), "{}", v.name);
    assert_eq!(hex(&marshal::to_bytes(&whole)), hex(body), "{}", v.name);

    let mut out = vec![0xee]; // encode_dict appends: whatever is in front stays.
    frame::encode_dict(&f.message, f.priority, &mut out);
    assert_eq!(hex(&out[1..]), hex(&v.wire), "{}: encode_dict", v.name);
    assert_eq!(out[0], 0xee);

    assert_json_round_trip(&v.name, &whole, body);
}

/// MS-FSWASDR 2.2.1: a bare marshal dict followed by `2E 2E 2E 00 00 00 00`.
fn check_wasdr(v: &Vector) {
    let limits = Limits::default();
    assert!(v.wire.ends_with(WASDR_TERMINATOR), "{}", v.name);
    let dict = v.marshal();
    let value = marshal::from_bytes(dict, &limits).unwrap_or_else(|e| panic!("{}: {e}", v.name));
    assert!(value.as_dict().is_some(), "{}: not a dict", v.name);
    assert_eq!(value.py_repr(), v.repr, "{}", v.name);
    assert_eq!(marshal::scan(dict, &limits), Ok(()), "{}", v.name);
    assert_eq!(hex(&marshal::to_bytes(&value)), hex(dict), "{}", v.name);
    // The terminator is not marshal data: reading the dict with it attached must say so.
    let err = marshal::from_bytes(&v.wire, &limits).unwrap_err();
    assert_eq!(err.offset, dict.len(), "{}", v.name);
    assert_json_round_trip(&v.name, &value, dict);
}

#[test]
fn every_vector_decodes_reencodes_and_round_trips_through_json() {
    let all = vectors();
    for v in &all {
        match v.framing() {
            Framing::Fscmt => check_fscmt(v),
            Framing::Wasdr => check_wasdr(v),
        }
    }
    let wasdr = all.iter().filter(|v| v.framing() == Framing::Wasdr).count();
    assert_eq!(
        (all.len(), wasdr),
        (15, 2),
        "vector file changed: review this test"
    );
}

#[test]
fn frames_read_back_to_back_from_one_buffer() {
    // A socket read delivers several frames at once; split must cut them at the right places.
    let all: Vec<Vector> = vectors()
        .into_iter()
        .filter(|v| v.framing() == Framing::Fscmt)
        .collect();
    let stream: Vec<u8> = all.iter().flat_map(|v| v.wire.iter().copied()).collect();
    let limits = Limits::default();
    let mut at = 0;
    for v in &all {
        let (body, used) = frame::split(&stream[at..], &limits).unwrap().unwrap();
        assert_eq!(body, v.marshal(), "{}", v.name);
        at += used;
    }
    assert_eq!(at, stream.len());
    assert_eq!(frame::split(&stream[at..], &limits), Ok(None));
}

#[test]
fn ppdup_add_fields_and_priorities() {
    // MS-FSCMT 2.2.3 (PPDUP_ADD): cm 52 with checksum, collection, node id and URI.
    let v = vector("PPDUP_ADD");
    let f = frame::decode_body(v.marshal(), &Limits::default()).unwrap();
    let msg = Value::Dict(f.message);
    assert_eq!(f.priority, Priority::Normal);
    assert_eq!(msg.get(b"cm").and_then(Value::as_i64), Some(52));
    assert_eq!(
        msg.get(b"dn").and_then(Value::as_bytes),
        Some(&b"example"[..])
    );
    assert_eq!(
        msg.get(b"cs").and_then(Value::as_bytes).map(hex).as_deref(),
        Some("a9ebcb8facbdc743775a1d3b522da8b6")
    );
    assert_eq!(msg.get(b"xx"), None);

    // MS-FSCMT 2.2.1: the URI_URG frame travels with priority 1.
    let urg = vector("CMD_UM_URI_URG");
    assert_eq!(
        frame::scan_body(urg.marshal(), &Limits::default()),
        Ok(Priority::High)
    );
}

#[test]
fn stat_floats_and_big_ints_keep_their_values() {
    let v = vector("CMD_UM_STAT_FLOATS");
    let f = frame::decode_body(v.marshal(), &Limits::default()).unwrap();
    let pd = Value::Dict(f.message).get(b"pd").cloned().unwrap();
    let times: Vec<Option<f64>> = pd
        .get(b"DLTime")
        .unwrap()
        .as_list()
        .unwrap()
        .iter()
        .map(Value::as_f64)
        .collect();
    assert_eq!(times, [Some(0.25), Some(0.1), Some(0.5), None]);
    assert_eq!(pd.get(b"Big").and_then(Value::as_i64), Some(1 << 40));
}
