//! What the `frame` fuzz target asserts about any input. Shared by the fuzz target
//! (fuzz_targets/frame.rs) and tests/fuzz_corpus.rs, which replays the corpus through it.

use crawlfleet_core::frame::{self, FrameError, MessageFrameError, HEADER_LEN};
use crawlfleet_core::marshal::json::{from_json, to_json};
use crawlfleet_core::marshal::{self, IntForm, Limits, Value};
use crawlfleet_core::msg::Message;

/// Panics when any invariant fails for `data`, taken as an FSCMT stream (MS-FSCMT 2.2.1: length
/// header, then a marshal `(dict, priority)`), as a bare frame body and as bare marshal.
pub fn check(data: &[u8]) {
    let limits = Limits::default();
    check_marshal(data, &limits);
    check_body(data, &limits);
    let announced = data
        .get(..HEADER_LEN)
        .map(|h| u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize);
    match frame::split(data, &limits) {
        Err(FrameError::TooLarge { len, limit }) => {
            assert_eq!(Some(len), announced);
            assert!(len > limit);
        }
        Err(e) => panic!("split can only refuse a length: {e:?}"),
        // More bytes are needed: the header, or the body it announces.
        Ok(None) => assert!(!matches!(announced, Some(n) if n <= data.len() - HEADER_LEN)),
        Ok(Some((body, used))) => {
            assert_eq!(Some(body.len()), announced);
            assert_eq!(used, HEADER_LEN + body.len());
            assert_eq!(body, &data[HEADER_LEN..used]);
            check_body(body, &limits);
        }
    }
}

/// `scan` agrees with `from_bytes`, error included; a decoded value re-encodes to the input, also
/// after a trip through its JSON form.
fn check_marshal(data: &[u8], limits: &Limits) {
    let decoded = marshal::from_bytes(data, limits);
    assert_eq!(
        marshal::scan(data, limits),
        decoded.as_ref().map(|_| ()).map_err(Clone::clone)
    );
    let Ok(v) = decoded else { return };
    assert_eq!(marshal::to_bytes(&v), data, "re-encoding");
    // Through the JSON text, as `crawlfleet inspect` carries it.
    let text = to_json(&v).to_string();
    let json = serde_json::from_str(&text).expect("to_json writes valid JSON");
    let back = from_json(&json).expect("from_json reads what to_json wrote");
    assert_eq!(marshal::to_bytes(&back), data, "re-encoding via JSON");
}

/// `scan_body` agrees with `decode_body`, `decode_message` (with its allocation-free path) agrees
/// with `decode_body` + `Message::from_dict`, and a decoded frame re-encodes to the body.
fn check_body(body: &[u8], limits: &Limits) {
    let scanned = frame::scan_body(body, limits);
    let decoded = frame::decode_body(body, limits);
    let typed = frame::decode_message(body, limits);
    match (&decoded, &typed) {
        (Ok(f), Ok((p, m))) => {
            assert_eq!(*p, f.priority);
            assert_eq!(Ok(m), Message::from_dict(&f.message).as_ref());
        }
        (Ok(f), Err(MessageFrameError::Message(e))) => {
            assert_eq!(Message::from_dict(&f.message).as_ref(), Err(e));
        }
        (Err(a), Err(MessageFrameError::Frame(b))) => assert_eq!(a, b),
        _ => panic!("decode_body {decoded:?} but decode_message {typed:?}"),
    }
    match (&scanned, &decoded) {
        (Ok(p), Ok(f)) => assert_eq!(*p, f.priority),
        (Err(a), Err(b)) => {
            // Invalid marshal is reported first by both, as the same error.
            if matches!(a, FrameError::Marshal(_)) || matches!(b, FrameError::Marshal(_)) {
                assert_eq!(a, b);
            }
        }
        _ => panic!("scan_body {scanned:?} but decode_body {decoded:?}"),
    }
    let Ok(f) = decoded else { return };
    let whole = marshal::from_bytes(body, limits).expect("a frame body is marshal");
    let Value::Tuple(items) = &whole else {
        panic!("a frame body is a tuple")
    };
    assert_eq!(items.len(), 2);
    // The message as decode_body gave it, with the priority in its wire form ('i', 'I', 'l', T, F).
    let rebuilt = Value::Tuple(vec![Value::Dict(f.message.clone()), items[1].clone()]);
    assert_eq!(marshal::to_bytes(&rebuilt), body, "re-encoding the frame");
    let wire_priority = match items[1] {
        Value::Int(p, _) => p,
        Value::Bool(b) => b.into(),
        ref other => panic!("priority {other:?} accepted"),
    };
    assert_eq!(wire_priority, f.priority.as_i64());
    if items[1] == Value::Int(f.priority.as_i64(), IntForm::Auto) {
        // A canonical ('i') priority: encode_dict gives back the whole frame.
        let mut out = Vec::new();
        frame::encode_dict(&f.message, f.priority, &mut out);
        assert_eq!(&out[HEADER_LEN..], body, "encode_dict");
        assert_eq!(frame::split(&out, limits), Ok(Some((body, out.len()))));
    }
}
