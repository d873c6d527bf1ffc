//! Tests of the HTTP request framing (RFC 9112 section 6.3) and the request and response helpers.

use super::*;

const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
const POST: &[u8] = b"POST /RPC2 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
const POST10: &[u8] = b"POST /b HTTP/1.0\nContent-Length: 2\n\nhi";

/// What one call of `next` gave, reduced to compare: a message's (len, body), or a refusal's
/// (len, status).
#[derive(Debug, PartialEq, Eq)]
enum Cut {
    Message(usize, std::ops::Range<usize>),
    Refused(usize, u16),
}

/// Cuts everything `stream` holds, the buffer growing one byte per call (the slowest network),
/// as the event loop would: a message leaves the front of the buffer, a refusal ends the input.
fn cut_bytewise(f: &mut HttpFraming, stream: &[u8]) -> Vec<Cut> {
    let (mut at, mut end, mut out) = (0, 0, Vec::new());
    while end <= stream.len() {
        match f.next(&stream[at..end]).unwrap() {
            Next::Message(m) => {
                assert!(m.len <= end - at && m.body.end == m.len);
                out.push(Cut::Message(m.len, m.body));
                at += m.len;
            }
            Next::Incomplete { needed } => {
                assert!(needed > end - at, "needed {needed} with {} bytes", end - at);
                end += 1;
            }
            Next::Refused(r) => {
                assert!(r.len > 0 && r.len <= end - at);
                out.push(Cut::Refused(r.len, r.status));
                return out;
            }
        }
    }
    out
}

/// Cuts `stream` given whole, in one buffer.
fn cut_whole(f: &mut HttpFraming, stream: &[u8]) -> Vec<Cut> {
    let (mut at, mut out) = (0, Vec::new());
    loop {
        match f.next(&stream[at..]).unwrap() {
            Next::Message(m) => {
                out.push(Cut::Message(m.len, m.body));
                at += m.len;
            }
            Next::Incomplete { .. } => return out,
            Next::Refused(r) => {
                out.push(Cut::Refused(r.len, r.status));
                return out;
            }
        }
    }
}

fn framing() -> HttpFraming {
    HttpFraming::new(1 << 10)
}

#[test]
fn pipelined_requests_are_cut_in_order_however_the_bytes_arrive() {
    let stream = [GET, POST, POST10, GET].concat();
    let want = vec![
        Cut::Message(GET.len(), GET.len()..GET.len()),
        Cut::Message(POST.len(), POST.len() - 5..POST.len()),
        Cut::Message(POST10.len(), POST10.len() - 2..POST10.len()),
        Cut::Message(GET.len(), GET.len()..GET.len()),
    ];
    assert_eq!(cut_whole(&mut framing(), &stream), want);
    assert_eq!(cut_bytewise(&mut framing(), &stream), want);
    // Two reads split at every byte: the state kept between calls (the parsed head, how far
    // the blank line was searched for) must not depend on where the split falls.
    for split in 0..=stream.len() {
        let mut f = framing();
        let mut got = Vec::new();
        let mut at = 0;
        for end in [split, stream.len()] {
            while let Next::Message(m) = f.next(&stream[at..end.max(at)]).unwrap() {
                got.push(Cut::Message(m.len, m.body));
                at += m.len;
            }
        }
        assert_eq!(got, want, "split at {split}");
    }
}

#[test]
fn the_body_length_is_awaited_exactly_once_the_head_is_in() {
    let mut f = framing();
    let head = POST.len() - 5;
    assert_eq!(
        f.next(&POST[..head]),
        Ok(Next::Incomplete { needed: POST.len() })
    );
    assert_eq!(
        f.next(&POST[..head + 2]),
        Ok(Next::Incomplete { needed: POST.len() })
    );
    assert!(matches!(f.next(POST), Ok(Next::Message(_))));
}

/// The status `head` is refused with, given whole and byte by byte.
fn refused(f: HttpFraming, head: &[u8]) -> u16 {
    let whole = cut_whole(&mut f.clone(), head);
    let bytewise = cut_bytewise(&mut f.clone(), head);
    let (Some(Cut::Refused(_, a)), Some(Cut::Refused(_, b))) = (whole.last(), bytewise.last())
    else {
        panic!("not refused: {whole:?} / {bytewise:?}")
    };
    assert_eq!(a, b, "{}", String::from_utf8_lossy(head));
    *a
}

#[test]
fn each_bad_request_is_refused_with_its_status() {
    let cases: [(&[u8], u16); 11] = [
        (b"\x00\x01\x02 garbage\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            400,
        ),
        (b"POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n", 400),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            411,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            501,
        ),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        (
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            400,
        ),
        (b"POST / HTTP/1.1\r\nContent-Length: 1025\r\n\r\n", 413),
    ];
    for (head, status) in cases {
        assert_eq!(
            refused(framing(), head),
            status,
            "{}",
            String::from_utf8_lossy(head)
        );
    }
    // A length too large for any integer is over any limit, not malformed.
    assert_eq!(
        refused(
            framing(),
            b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"
        ),
        413
    );
    // Transfer-Encoding beside a Content-Length is refused all the same (RFC 9112 6.3 item 3).
    assert_eq!(
        refused(
            framing(),
            b"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nhi"
        ),
        411
    );
}

#[test]
fn repeated_identical_lengths_are_one_length() {
    let req = b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nhi";
    assert_eq!(
        cut_whole(&mut framing(), req),
        vec![Cut::Message(req.len(), req.len() - 2..req.len())]
    );
}

#[test]
fn heads_over_the_limits_get_431() {
    let mut long = b"GET / HTTP/1.1\r\nX-Pad: ".to_vec();
    long.extend(std::iter::repeat_n(b'a', DEFAULT_MAX_HEAD));
    // Never finished: refused once it outgrows the limit.
    assert_eq!(refused(framing(), &long), 431);
    let cut = cut_bytewise(&mut framing(), &long);
    assert_eq!(cut, vec![Cut::Refused(DEFAULT_MAX_HEAD + 1, 431)]);
    // Finished, but too long all the same.
    long.extend_from_slice(b"\r\n\r\n");
    assert_eq!(
        cut_whole(&mut framing(), &long)
            .last()
            .map(|c| matches!(c, Cut::Refused(_, 431))),
        Some(true)
    );
    // Too many fields.
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..9 {
        many.extend(format!("X-{i}: v\r\n").bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(refused(framing().max_headers(8), &many), 431);
    assert_eq!(cut_whole(&mut framing().max_headers(9), &many).len(), 1);
    // A small head limit.
    assert_eq!(refused(framing().max_head(20), GET), 431);
}

#[test]
fn request_reads_back_the_head_and_body() {
    let r = Request::parse(POST).unwrap();
    assert_eq!((r.method, r.path, r.minor_version), ("POST", "/RPC2", 1));
    assert_eq!(r.header("content-length"), Some(&b"5"[..]));
    assert_eq!(r.header("x-none"), None);
    assert_eq!(r.body, b"hello");
    assert!(r.keep_alive());
    let r = Request::parse(POST10).unwrap();
    assert_eq!((r.minor_version, r.body), (0, &b"hi"[..]));
    assert!(!r.keep_alive());
    let ka10 = b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
    assert!(Request::parse(ka10).unwrap().keep_alive());
    let close11 = b"GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n";
    assert!(!Request::parse(close11).unwrap().keep_alive());
    assert_eq!(Request::parse(b"GET / HTTP/1.1\r\n"), None);
}

#[test]
fn responses_carry_length_and_connection() {
    let mut out = Vec::new();
    write_response(
        &mut out,
        405,
        "text/plain",
        &[("Allow", "POST")],
        b"no\n",
        false,
    );
    assert_eq!(
        out,
        b"HTTP/1.1 405 Method Not Allowed\r\nServer: crawlfleet\r\nContent-Type: text/plain\r\n\
          Content-Length: 3\r\nAllow: POST\r\nConnection: close\r\n\r\nno\n"
    );
    out.clear();
    write_response(&mut out, 200, "text/xml", &[], b"", true);
    assert_eq!(
        out,
        b"HTTP/1.1 200 OK\r\nServer: crawlfleet\r\nContent-Type: text/xml\r\nContent-Length: 0\r\n\r\n"
    );
}
