//! What the `xmlrpc` fuzz target asserts about any input. Shared by the fuzz target
//! (fuzz_targets/xmlrpc.rs) and tests/fuzz_corpus.rs, which replays the corpus through it.

use crawlfleet_core::marshal;
use crawlfleet_core::xmlrpc::{self, Fault, Limits, MethodCall, Value};

/// Panics when any invariant fails for `data`, taken as an XML-RPC body (the transport of
/// MS-FSCADM 2.1): as a `methodCall` and as a `methodResponse`, whatever parses encodes to a body
/// that parses back to the same call, value or fault, up to what the encoder documents it
/// changes; tighter limits only ever refuse more.
pub fn check(data: &[u8]) {
    let limits = Limits::default();
    let tight = Limits {
        max_body: data.len().saturating_sub(1).max(1 << 10),
        max_depth: 8,
    };
    let call = xmlrpc::parse_call(data, &limits);
    if let Ok(tight_call) = xmlrpc::parse_call(data, &tight) {
        assert_eq!(Ok(&tight_call), call.as_ref(), "tighter limits, other call");
    }
    match &call {
        Ok(c) => check_call(c),
        Err(e) => drop(e.to_string()),
    }
    let response = xmlrpc::parse_response(data, &limits);
    if let Ok(tight_response) = xmlrpc::parse_response(data, &tight) {
        assert_eq!(
            Ok(&tight_response),
            response.as_ref(),
            "tighter limits, other response"
        );
    }
    match &response {
        Ok(Ok(v)) => {
            let back = xmlrpc::parse_response(&xmlrpc::encode_response(v), &limits);
            assert_eq!(back, Ok(Ok(normalized(v))), "response round trip");
            check_marshal(v);
        }
        Ok(Err(f)) => {
            // XML-RPC's int is 32 bits wide: a wider faultCode (read from an i8) cannot be
            // written back as an int. FSCADM 2.2.7 faults carry 1.
            if i32::try_from(f.code).is_ok() {
                let back =
                    xmlrpc::parse_response(&xmlrpc::encode_fault(f.code, &f.message), &limits);
                let expected = Fault {
                    code: f.code,
                    message: f.message.clone(),
                };
                assert_eq!(back, Ok(Err(expected)), "fault round trip");
            }
            drop(f.to_string());
        }
        Err(e) => drop(e.to_string()),
    }
    // A body is a call or a response, never both.
    assert!(call.is_err() || response.is_err());
}

fn check_call(c: &MethodCall) {
    assert!(!c.method.is_empty());
    let body = xmlrpc::encode_call(&c.method, &c.params);
    let back = xmlrpc::parse_call(&body, &Limits::default());
    let expected = MethodCall {
        method: c.method.clone(),
        params: c.params.iter().map(normalized).collect(),
    };
    assert_eq!(back, Ok(expected), "call round trip");
    for p in &c.params {
        check_marshal(p);
    }
}

/// The conversion to marshal gives a value the marshal codec carries unchanged, and back.
fn check_marshal(v: &Value) {
    let m = xmlrpc::to_marshal(v);
    let bytes = marshal::to_bytes(&m);
    let unbounded = marshal::Limits {
        max_size: usize::MAX,
        ..marshal::Limits::default()
    };
    match marshal::from_bytes(&bytes, &unbounded) {
        Ok(back) => assert_eq!(back, m, "marshal round trip"),
        // Deeper than the marshal decoder's nesting bound: the XML-RPC depth limit is higher.
        Err(e) => assert!(
            matches!(e.kind, marshal::DecodeErrorKind::TooDeep { .. }),
            "{e:?}"
        ),
    }
    drop(xmlrpc::from_marshal(&m));
}

/// What the encoder writes for `v`, as read back: integers outside XML-RPC's 32-bit int become
/// doubles (FSCADM 2.2.4.6). Text comes back unchanged: the parser refuses the characters XML
/// cannot carry, which the encoder would replace.
fn normalized(v: &Value) -> Value {
    match v {
        Value::Int(i) if i32::try_from(*i).is_err() => Value::Double(*i as f64),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::Struct(members) => Value::Struct(
            members
                .iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}
