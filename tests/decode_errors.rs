//! Every way marshal input and FSCMT frames can be refused, each with its exact error and offset;
//! `scan` and `scan_body` must refuse the same input with the same error. Then: truncations and
//! corruptions of every golden vector are refused, never a panic.

use crawlfleet_core::frame::{self, FrameError, Priority};
use crawlfleet_core::marshal::{self, DecodeError, DecodeErrorKind, Limits};

use crate::util::{hex, vectors, Framing};

fn err(offset: usize, kind: DecodeErrorKind) -> DecodeError {
    DecodeError { offset, kind }
}

/// Decodes `input` with `limits`, expecting `expected` from both `from_bytes` and `scan`.
fn refused_with(input: &[u8], limits: &Limits, expected: DecodeError) {
    assert_eq!(
        marshal::from_bytes(input, limits).map(|v| v.py_repr()),
        Err(expected.clone()),
        "from_bytes {}",
        hex(input)
    );
    assert_eq!(
        marshal::scan(input, limits),
        Err(expected),
        "scan {}",
        hex(input)
    );
}

fn refused(input: &[u8], expected: DecodeError) {
    refused_with(input, &Limits::default(), expected);
}

/// `(n` as the header of a tuple of `n` items.
fn tuple_header(n: u32) -> Vec<u8> {
    let mut v = vec![b'('];
    v.extend_from_slice(&n.to_le_bytes());
    v
}

#[test]
fn truncated() {
    refused(b"", err(0, DecodeErrorKind::Truncated { needed: 1 }));
    // 'i' wants 4 bytes, 2 are there; the offset is where the bytes ran out.
    refused(
        b"i\x01\x00",
        err(3, DecodeErrorKind::Truncated { needed: 2 }),
    );
    refused(
        b"g\x00\x00\x00",
        err(4, DecodeErrorKind::Truncated { needed: 5 }),
    );
    refused(b"f\x04", err(2, DecodeErrorKind::Truncated { needed: 4 }));
    // A dict that never sees its '0'.
    refused(b"{N", err(2, DecodeErrorKind::Truncated { needed: 1 }));
    refused(b"{", err(1, DecodeErrorKind::Truncated { needed: 1 }));
}

#[test]
fn unknown_type() {
    // 'c' is a code object: not part of the wire format (DESIGN.md, wire formats).
    refused(b"c", err(0, DecodeErrorKind::UnknownType(b'c')));
    refused(
        b"y\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        err(0, DecodeErrorKind::UnknownType(b'y')),
    );
    let mut nested = tuple_header(2);
    nested.extend_from_slice(b"N\xff");
    refused(&nested, err(6, DecodeErrorKind::UnknownType(0xff)));
}

#[test]
fn negative_length() {
    // The offset names the length field, not the type code.
    refused(
        b"s\xff\xff\xff\xff",
        err(1, DecodeErrorKind::NegativeLength(-1)),
    );
    refused(
        b"[\x00\x00\x00\x80",
        err(1, DecodeErrorKind::NegativeLength(i32::MIN.into())),
    );
    refused(
        b"u\xfe\xff\xff\xffab",
        err(1, DecodeErrorKind::NegativeLength(-2)),
    );
}

#[test]
fn length_exceeds_input() {
    refused(
        b"s\x05\x00\x00\x00ab",
        err(
            1,
            DecodeErrorKind::LengthExceedsInput {
                declared: 5,
                left: 2,
            },
        ),
    );
    // Two billion items announced by five bytes: refused before anything is allocated.
    refused(
        b"(\xff\xff\xff\x7f",
        err(
            1,
            DecodeErrorKind::LengthExceedsInput {
                declared: i32::MAX as u64,
                left: 0,
            },
        ),
    );
    // A long of 3 digits (6 bytes) with 2 bytes left; a negative size counts its digits too.
    refused(
        b"l\x03\x00\x00\x00\x01\x00",
        err(
            1,
            DecodeErrorKind::LengthExceedsInput {
                declared: 3,
                left: 2,
            },
        ),
    );
    refused(
        b"l\xfd\xff\xff\xff\x01\x00",
        err(
            1,
            DecodeErrorKind::LengthExceedsInput {
                declared: 3,
                left: 2,
            },
        ),
    );
}

#[test]
fn too_deep() {
    // 64 nested tuples are allowed by default; the 65th is refused where it starts.
    let nest = |n: usize| {
        let mut v: Vec<u8> = (0..n).flat_map(|_| tuple_header(1)).collect();
        v.push(b'N');
        v
    };
    assert!(marshal::from_bytes(&nest(64), &Limits::default()).is_ok());
    assert_eq!(marshal::scan(&nest(64), &Limits::default()), Ok(()));
    refused(
        &nest(65),
        err(64 * 5, DecodeErrorKind::TooDeep { limit: 64 }),
    );
    let shallow = Limits {
        max_depth: 2,
        ..Limits::default()
    };
    refused_with(
        b"{N{N[\x00\x00\x00\x0000",
        &shallow,
        err(4, DecodeErrorKind::TooDeep { limit: 2 }),
    );
    // The same depth rule holds inside a frame body, through scan_body's own path.
    let mut body = b"(\x02\x00\x00\x00{s\x01\x00\x00\x00a".to_vec();
    body.extend_from_slice(&nest(63));
    body.extend_from_slice(b"0i\x00\x00\x00\x00");
    // Tuple and dict take two levels: the 63rd tuple inside would be level 65.
    let expected = FrameError::Marshal(err(12 + 62 * 5, DecodeErrorKind::TooDeep { limit: 64 }));
    assert_eq!(
        frame::decode_body(&body, &Limits::default()).map(|f| f.priority),
        Err(expected.clone())
    );
    assert_eq!(frame::scan_body(&body, &Limits::default()), Err(expected));
}

#[test]
fn too_large() {
    let small = Limits {
        max_size: 10,
        ..Limits::default()
    };
    refused_with(
        b"s\x06\x00\x00\x00abcdef",
        &small,
        err(
            0,
            DecodeErrorKind::TooLarge {
                size: 11,
                limit: 10,
            },
        ),
    );
    assert!(marshal::from_bytes(b"s\x05\x00\x00\x00abcde", &small).is_ok());
}

#[test]
fn bad_string_ref() {
    refused(
        b"R\x00\x00\x00\x00",
        err(
            0,
            DecodeErrorKind::BadStringRef {
                index: 0,
                interned: 0,
            },
        ),
    );
    refused(
        b"R\xff\xff\xff\xff",
        err(
            0,
            DecodeErrorKind::BadStringRef {
                index: -1,
                interned: 0,
            },
        ),
    );
    // One 't' read: index 0 is fine, index 1 is not.
    let mut ok = tuple_header(2);
    ok.extend_from_slice(b"t\x01\x00\x00\x00aR\x00\x00\x00\x00");
    assert_eq!(
        marshal::from_bytes(&ok, &Limits::default())
            .unwrap()
            .py_repr(),
        "(b'a', b'a')"
    );
    let mut bad = tuple_header(2);
    bad.extend_from_slice(b"t\x01\x00\x00\x00aR\x01\x00\x00\x00");
    refused(
        &bad,
        err(
            11,
            DecodeErrorKind::BadStringRef {
                index: 1,
                interned: 1,
            },
        ),
    );
    // An 's' string is not interned: it adds nothing to the table.
    let mut plain = tuple_header(2);
    plain.extend_from_slice(b"s\x01\x00\x00\x00aR\x00\x00\x00\x00");
    refused(
        &plain,
        err(
            11,
            DecodeErrorKind::BadStringRef {
                index: 0,
                interned: 0,
            },
        ),
    );
}

#[test]
fn bad_float_text() {
    refused(b"f\x03abc", err(0, DecodeErrorKind::BadFloatText));
    refused(b"f\x00", err(0, DecodeErrorKind::BadFloatText));
    assert_eq!(
        marshal::from_bytes(b"f\x041e16", &Limits::default())
            .unwrap()
            .py_repr(),
        "1e+16"
    );
}

#[test]
fn unnormalized_long() {
    refused(
        b"l\x02\x00\x00\x00\x01\x00\x00\x00",
        err(0, DecodeErrorKind::UnnormalizedLong),
    );
    refused(
        b"l\xff\xff\xff\xff\x00\x00",
        err(0, DecodeErrorKind::UnnormalizedLong),
    );
}

#[test]
fn long_digit_out_of_range() {
    refused(
        b"l\x01\x00\x00\x00\x00\x80",
        err(0, DecodeErrorKind::LongDigitOutOfRange(0x8000)),
    );
    refused(
        b"l\x02\x00\x00\x00\xff\xff\x01\x00",
        err(0, DecodeErrorKind::LongDigitOutOfRange(0xffff)),
    );
}

#[test]
fn null_outside_dict() {
    refused(b"0", err(0, DecodeErrorKind::NullOutsideDict));
    let mut in_tuple = tuple_header(1);
    in_tuple.push(b'0');
    refused(&in_tuple, err(5, DecodeErrorKind::NullOutsideDict));
    // A '0' in a dict ends it only where a key would start, not as a value.
    refused(
        b"{s\x01\x00\x00\x00a0",
        err(7, DecodeErrorKind::NullOutsideDict),
    );
}

#[test]
fn trailing_bytes() {
    refused(b"NN", err(1, DecodeErrorKind::TrailingBytes { count: 1 }));
    refused(
        b"{0\x2e\x2e\x2e\x00\x00\x00\x00",
        err(2, DecodeErrorKind::TrailingBytes { count: 7 }),
    );
}

/// `decode_body` and `scan_body` both refuse `body` with `expected`.
fn frame_refused(body: &[u8], expected: FrameError) {
    let limits = Limits::default();
    assert_eq!(
        frame::decode_body(body, &limits).map(|f| f.priority),
        Err(expected.clone()),
        "decode_body {}",
        hex(body)
    );
    assert_eq!(
        frame::scan_body(body, &limits),
        Err(expected),
        "scan_body {}",
        hex(body)
    );
}

#[test]
fn frame_too_large() {
    // MS-FSCMT 2.2.1: the header is checked before waiting for (or allocating) the body.
    let limits = Limits {
        max_size: 16,
        ..Limits::default()
    };
    assert_eq!(
        frame::split(b"\x00\x00\x00\x11", &limits),
        Err(FrameError::TooLarge { len: 17, limit: 16 })
    );
    assert_eq!(
        frame::split(b"\xff\xff\xff\xff", &Limits::default()),
        Err(FrameError::TooLarge {
            len: u32::MAX as usize,
            limit: 64 << 20
        })
    );
    assert_eq!(frame::split(b"\x00\x00\x00\x10", &limits), Ok(None));
    assert_eq!(frame::split(b"\x00\x00\x00", &limits), Ok(None));
}

#[test]
fn frame_marshal_error() {
    frame_refused(
        b"(\x02\x00\x00\x00{0i\x00\x00\x00",
        FrameError::Marshal(err(11, DecodeErrorKind::Truncated { needed: 1 })),
    );
    frame_refused(
        b"(\x02\x00\x00\x00{0i\x00\x00\x00\x00N",
        FrameError::Marshal(err(12, DecodeErrorKind::TrailingBytes { count: 1 })),
    );
    // Bad marshal is reported as such even when the shape is wrong too.
    frame_refused(
        b"[\x02\x00\x00\x00Nx",
        FrameError::Marshal(err(6, DecodeErrorKind::UnknownType(b'x'))),
    );
    let small = Limits {
        max_size: 4,
        ..Limits::default()
    };
    let expected = FrameError::Marshal(err(0, DecodeErrorKind::TooLarge { size: 11, limit: 4 }));
    assert_eq!(
        frame::scan_body(b"(\x02\x00\x00\x00{0i\x00\x00\x00", &small),
        Err(expected)
    );
}

#[test]
fn frame_not_a_frame_tuple() {
    frame_refused(b"N", FrameError::NotAFrameTuple("not a tuple"));
    frame_refused(
        b"[\x02\x00\x00\x00{0i\x00\x00\x00\x00",
        FrameError::NotAFrameTuple("not a tuple"),
    );
    frame_refused(
        b"(\x01\x00\x00\x00{0",
        FrameError::NotAFrameTuple("tuple length is not 2"),
    );
    frame_refused(
        b"(\x03\x00\x00\x00{0i\x00\x00\x00\x00N",
        FrameError::NotAFrameTuple("tuple length is not 2"),
    );
    frame_refused(
        b"(\x02\x00\x00\x00[\x00\x00\x00\x00i\x00\x00\x00\x00",
        FrameError::NotAFrameTuple("first element is not a dict"),
    );
    frame_refused(
        b"(\x02\x00\x00\x00{0N",
        FrameError::NotAFrameTuple("priority is not an integer"),
    );
    frame_refused(
        b"(\x02\x00\x00\x00{0g\x00\x00\x00\x00\x00\x00\xf0\x3f",
        FrameError::NotAFrameTuple("priority is not an integer"),
    );
}

#[test]
fn frame_bad_priority() {
    frame_refused(
        b"(\x02\x00\x00\x00{0i\x02\x00\x00\x00",
        FrameError::BadPriority(2),
    );
    frame_refused(
        b"(\x02\x00\x00\x00{0i\xff\xff\xff\xff",
        FrameError::BadPriority(-1),
    );
    // Other integer forms of 0 and 1 are priorities too.
    let limits = Limits::default();
    assert_eq!(
        frame::scan_body(
            b"(\x02\x00\x00\x00{0I\x01\x00\x00\x00\x00\x00\x00\x00",
            &limits
        ),
        Ok(Priority::High)
    );
    assert_eq!(
        frame::scan_body(b"(\x02\x00\x00\x00{0l\x00\x00\x00\x00", &limits),
        Ok(Priority::Normal)
    );
}

#[test]
fn truncated_vectors_are_refused_at_every_length() {
    let limits = Limits::default();
    for v in vectors() {
        let m = v.marshal();
        for cut in 0..m.len() {
            let part = &m[..cut];
            let decoded = marshal::from_bytes(part, &limits);
            // Marshal is self-delimiting: no strict prefix of a value is a value.
            let e = decoded.expect_err(&format!("{} cut at {cut}", v.name));
            assert!(
                matches!(
                    e.kind,
                    DecodeErrorKind::Truncated { .. } | DecodeErrorKind::LengthExceedsInput { .. }
                ),
                "{} cut at {cut}: {e}",
                v.name
            );
            assert_eq!(
                marshal::scan(part, &limits),
                Err(e.clone()),
                "{} cut at {cut}",
                v.name
            );
            if v.framing() == Framing::Fscmt {
                let d = frame::decode_body(part, &limits).map(|f| f.priority);
                assert_eq!(
                    d,
                    Err(FrameError::Marshal(e.clone())),
                    "{} cut at {cut}",
                    v.name
                );
                assert_eq!(
                    frame::scan_body(part, &limits),
                    d,
                    "{} cut at {cut}",
                    v.name
                );
            }
        }
        if v.framing() == Framing::Fscmt {
            for cut in 0..v.wire.len() {
                assert_eq!(
                    frame::split(&v.wire[..cut], &limits),
                    Ok(None),
                    "{} cut at {cut}",
                    v.name
                );
            }
        }
    }
}

#[test]
fn corrupted_vectors_never_panic_and_scan_agrees() {
    // Each byte of each vector replaced by values that hit type codes, lengths and signs.
    let limits = Limits::default();
    let mut checked = 0;
    for v in vectors() {
        let m = v.marshal();
        for at in 0..m.len() {
            for b in [
                0x00,
                0x01,
                0x7f,
                0x80,
                0xff,
                b'0',
                b'(',
                b'{',
                b'R',
                b'l',
                m[at] ^ 0x20,
            ] {
                let mut c = m.to_vec();
                c[at] = b;
                let d = marshal::from_bytes(&c, &limits);
                if let Ok(value) = &d {
                    assert_eq!(marshal::to_bytes(value), c, "{} [{at}]={b:02x}", v.name);
                }
                assert_eq!(
                    marshal::scan(&c, &limits),
                    d.map(|_| ()),
                    "{} [{at}]={b:02x}",
                    v.name
                );
                let body = frame::decode_body(&c, &limits).map(|f| f.priority);
                assert_eq!(
                    frame::scan_body(&c, &limits).is_ok(),
                    body.is_ok(),
                    "{} [{at}]={b:02x}",
                    v.name
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 10_000);
}

// Known core bug (minor): when the first element is not a dict and the priority is bad too,
// decode_body reports the priority (it checks the last element first) while scan_body reports
// the dict, in wire order. Both refuse the frame; the error should be the same.
#[test]
fn frame_errors_name_the_first_problem_in_wire_order() {
    frame_refused(
        b"(\x02\x00\x00\x00Ni\x02\x00\x00\x00",
        FrameError::NotAFrameTuple("first element is not a dict"),
    );
    frame_refused(
        b"(\x02\x00\x00\x00NN",
        FrameError::NotAFrameTuple("first element is not a dict"),
    );
}

// Core bug found by the fuzzer (a panic on peer input): scan_body passes over the dict with
// `skip`, which counts interned strings without keeping them, then decodes the priority with
// `value`; an `R` priority naming a string interned inside the dict indexes the empty table
// (index out of bounds, core/src/marshal/decode.rs, tag::STRINGREF in value_at_depth).
#[test]
fn scan_body_refuses_a_string_ref_priority_without_panicking() {
    frame_refused(
        b"(\x02\x00\x00\x00{t\x01\x00\x00\x00aN0R\x00\x00\x00\x00",
        FrameError::NotAFrameTuple("priority is not an integer"),
    );
}
