//! What the `http` fuzz target asserts about any input. Shared by the fuzz target
//! (fuzz_targets/http.rs) and tests/fuzz_corpus.rs, which replays the corpus through it.

use crawlfleet_net::http::{HttpFraming, Request};
use crawlfleet_net::{Framing, Next};

/// Limits picked by the input's first three bytes, small enough that refusals are reached.
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_body: usize,
    max_head: usize,
    max_headers: usize,
}

impl Limits {
    fn framing(self) -> HttpFraming {
        HttpFraming::new(self.max_body)
            .max_head(self.max_head)
            .max_headers(self.max_headers)
    }
}

/// A request as a framing cut it: (bytes used, body range) or a refusal (status).
#[derive(Clone, Debug, PartialEq)]
enum Cut {
    Request(usize, std::ops::Range<usize>),
    Refused(u16),
}

/// Panics when any invariant fails for `data`, taken as the input of an HTTP/1.1 connection to
/// a server on the event loop (RFC 9112: pipelined requests, bodies by `Content-Length`). The
/// first three bytes pick the body limit (0 to 2040 bytes), the head limit (64 to 4144 bytes)
/// and the most header fields (1 to 16); the rest is also cut under the default head limits.
pub fn check(data: &[u8]) {
    let [b0, b1, b2, stream @ ..] = data else {
        return;
    };
    let small = Limits {
        max_body: 8 * usize::from(*b0),
        max_head: 64 + 16 * usize::from(*b1),
        max_headers: 1 + usize::from(*b2 % 16),
    };
    let default = Limits {
        max_body: 1 << 20,
        max_head: crawlfleet_net::http::DEFAULT_MAX_HEAD,
        max_headers: crawlfleet_net::http::DEFAULT_MAX_HEADERS,
    };
    for limits in [small, default] {
        check_stream(stream, limits);
        check_constructed(stream, limits);
    }
}

/// Cuts `stream` all at once and byte by byte: the same requests, and a refusal at the same
/// place when both refuse. (Cut byte by byte, a malformed head is only parsed again once its
/// blank line arrives, so input that ends before it may be refused at once but awaited when it
/// trickles in.)
fn check_stream(stream: &[u8], limits: Limits) {
    let whole = cut(stream, limits, false);
    let bytewise = cut(stream, limits, true);
    let requests = |c: &[(usize, Cut)]| -> Vec<(usize, Cut)> {
        c.iter()
            .filter(|(_, c)| matches!(c, Cut::Request(..)))
            .cloned()
            .collect()
    };
    assert_eq!(
        requests(&whole),
        requests(&bytewise),
        "all at once vs byte by byte"
    );
    let refusal = |c: &[(usize, Cut)]| {
        c.iter()
            .find(|(_, c)| matches!(c, Cut::Refused(_)))
            .map(|r| r.0)
    };
    if let (Some(a), Some(b)) = (refusal(&whole), refusal(&bytewise)) {
        assert_eq!(a, b, "refused at different offsets");
    }
}

/// Cuts `stream` with a fresh framing, all at once or byte by byte, checking each request
/// against the buffer and the limits and reading it back with [`Request::parse`]. Gives each
/// request or refusal with the offset it starts at; nothing follows a refusal (the loop reads no
/// more from that connection).
fn cut(stream: &[u8], limits: Limits, bytewise: bool) -> Vec<(usize, Cut)> {
    let mut f = limits.framing();
    let mut out = Vec::new();
    let mut at = 0;
    let mut end = if bytewise { 0 } else { stream.len() };
    loop {
        let buf = &stream[at..end];
        match f
            .next(buf)
            .expect("HTTP framing refuses with a status, not an error")
        {
            Next::Message(m) => {
                assert!(
                    m.len > 0 && m.len <= buf.len(),
                    "{m:?} in {} bytes",
                    buf.len()
                );
                assert_eq!(m.body.end, m.len, "{m:?}");
                let head = m.body.start;
                assert!(head > 0 && head <= limits.max_head, "head of {head} bytes");
                assert!(m.body.len() <= limits.max_body, "body of {}", m.body.len());
                let raw = &buf[..m.len];
                let req = Request::parse(raw).expect("a cut request reads back");
                assert_eq!(req.body, &raw[m.body.clone()]);
                assert!(req.headers.len() <= limits.max_headers);
                assert!(req.minor_version <= 1);
                let length = req.header("content-length");
                match length {
                    // Identical repeats are one length (RFC 9110 8.6).
                    Some(v) => assert!(v.split(|&b| b == b',').all(|p| {
                        std::str::from_utf8(p)
                            .ok()
                            .and_then(|p| p.trim().parse::<usize>().ok())
                            == Some(req.body.len())
                    })),
                    None => assert!(req.body.is_empty()),
                }
                assert!(req.header("transfer-encoding").is_none());
                let _ = req.keep_alive();
                out.push((at, Cut::Request(m.len, m.body)));
                at += m.len;
            }
            Next::Refused(r) => {
                assert!(
                    r.len >= 1 && r.len <= buf.len(),
                    "{r:?} in {} bytes",
                    buf.len()
                );
                assert!(
                    [400, 411, 413, 431, 501].contains(&r.status),
                    "status {}",
                    r.status
                );
                out.push((at, Cut::Refused(r.status)));
                return out;
            }
            Next::Incomplete { needed } => {
                assert!(
                    needed > buf.len(),
                    "needs {needed} with {} at hand",
                    buf.len()
                );
                // A head is awaited only within its limit, a body only within its own: nothing
                // past the limits is ever buffered.
                assert!(
                    needed <= limits.max_head + limits.max_body + 1,
                    "needs {needed} under {limits:?}"
                );
                if end == stream.len() {
                    return out;
                }
                end = if bytewise { end + 1 } else { stream.len() };
            }
        }
    }
}

/// A POST whose body is the fuzzer's bytes is cut whole, its body intact, when within the
/// limits, and refused with 413 when the body is over them; the rest is cut as on its own.
fn check_constructed(stream: &[u8], limits: Limits) {
    let head = format!(
        "POST /RPC2 HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
        stream.len()
    );
    let mut whole = head.clone().into_bytes();
    whole.extend_from_slice(stream);
    whole.extend_from_slice(stream);
    let cuts = cut(&whole, limits, false);
    if head.len() > limits.max_head || limits.max_headers < 2 {
        assert_eq!(cuts, [(0, Cut::Refused(431))]);
    } else if stream.len() > limits.max_body {
        assert_eq!(cuts, [(0, Cut::Refused(413))]);
    } else {
        let len = head.len() + stream.len();
        assert_eq!(cuts.first(), Some(&(0, Cut::Request(len, head.len()..len))));
        let after: Vec<_> = cut(stream, limits, false)
            .into_iter()
            .map(|(at, c)| (at + len, c))
            .collect();
        assert_eq!(&cuts[1..], &after[..], "the stream after a whole request");
    }
}
