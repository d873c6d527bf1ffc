//! Serving HTTP/1.1 on the event loop: [`HttpFraming`] cuts requests off a connection (RFC 9112
//! section 6.3: the body's length from `Content-Length`), [`Request`] reads a cut request's head
//! and body, [`write_response`] writes an answer.
//!
//! The framing checks what a server must check before it buffers a request: the head is at most
//! [`HttpFraming::max_head`] bytes (16 KiB by default) with at most [`HttpFraming::max_headers`]
//! fields (431 beyond either), the body at most [`HttpFraming::max_body`] bytes (413 beyond; the
//! body is refused from the head alone, before a byte of it is read). Requests that cannot be
//! framed are refused with a status code ([`Next::Refused`]): the loop hands the refusal to the
//! role as the connection's last message ([`FrameBatch::refusal`](crate::FrameBatch::refusal)),
//! reads nothing more from it, and the role answers with that status and closes the connection
//! ([`Handle::close`](crate::Handle::close): the answer is written first). So a client always
//! learns why, and the server logs it once, where it answers.
//!
//! What is refused, and why:
//! - an unparseable head (httparse's error), an invalid `Content-Length` (not `1*DIGIT`), or
//!   several that disagree: 400 (RFC 9112 section 6.3 item 5; identical repeats are accepted);
//! - `Transfer-Encoding` on a request: the length of a chunked body is not known before it is
//!   read, and request bodies here are bounded up front, so a final `chunked` coding gets 411
//!   Length Required (RFC 9110 section 15.5.12: the client may retry with `Content-Length`), any
//!   other coding before it 501 (RFC 9112 section 6.1: a coding the server does not understand),
//!   and a final coding that is not `chunked`, or any `Transfer-Encoding` in an HTTP/1.0
//!   request, 400 (RFC 9112 sections 6.1 and 6.3 item 4, which also say to close);
//! - a head over the limit, or too many fields: 431; a body over the limit: 413.
//!
//! A request without `Content-Length` or `Transfer-Encoding` has no body (RFC 9112 section 6.3
//! item 6). Pipelined requests are cut in order; the role answers them in order.

use crawlfleet_core::frame::Priority;

use crate::framing::{Framing, FramingError, MessageMeta, Next, Refusal};

/// Default largest request head (request line and header fields).
pub const DEFAULT_MAX_HEAD: usize = 16 << 10;
/// Default most header fields in a request head.
pub const DEFAULT_MAX_HEADERS: usize = 64;
/// The most header fields any framing parses, whatever its setting.
const HEADERS_CAP: usize = 128;

/// HTTP/1.1 request framing (one clone per connection). A cut message is the whole request:
/// its body range is the request body; read the head with [`Request::parse`] on
/// [`FrameBatch::raw`](crate::FrameBatch::raw).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpFraming {
    max_head: usize,
    max_headers: usize,
    max_body: usize,
    /// The current request's head, once complete: (head length, body length).
    head: Option<(usize, usize)>,
    /// Bytes of the current request already searched for the end of its head.
    scanned: usize,
}

impl HttpFraming {
    /// A framing that refuses bodies over `max_body` bytes, with the default head limits.
    pub fn new(max_body: usize) -> Self {
        HttpFraming {
            max_head: DEFAULT_MAX_HEAD,
            max_headers: DEFAULT_MAX_HEADERS,
            max_body,
            head: None,
            scanned: 0,
        }
    }

    /// Sets the largest request head, in bytes.
    pub fn max_head(mut self, bytes: usize) -> Self {
        self.max_head = bytes;
        self
    }

    /// Sets the most header fields in a request (at most 128).
    pub fn max_headers(mut self, fields: usize) -> Self {
        self.max_headers = fields.min(HEADERS_CAP);
        self
    }

    /// The largest request body accepted, in bytes.
    pub fn max_body(&self) -> usize {
        self.max_body
    }

    /// Parses the head at the front of `buf` once it is complete.
    fn scan_head(&mut self, buf: &[u8]) -> Head {
        // httparse starts over on every call; look for the blank line that ends a head first,
        // so a head trickling in byte by byte is not parsed once per byte. The first bytes are
        // parsed at once all the same, so garbage is refused without waiting for a blank line.
        let from = self.scanned.saturating_sub(3);
        let ended = head_end(&buf[from..]).is_some();
        let first = self.scanned == 0;
        self.scanned = buf.len();
        if !ended && !first {
            return self.partial(buf);
        }
        let mut fields = [httparse::EMPTY_HEADER; HEADERS_CAP];
        let mut req = httparse::Request::new(&mut fields[..self.max_headers]);
        let head_len = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return self.partial(buf),
            Err(httparse::Error::TooManyHeaders) => {
                return Head::Refused(431, "too many header fields")
            }
            Err(_) => return Head::Refused(400, "malformed request head"),
        };
        if head_len > self.max_head {
            return Head::Refused(431, "request head too large");
        }
        let http10 = req.version == Some(0);
        let mut length: Option<u64> = None;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return transfer_encoding(h.value, http10);
            }
            if !h.name.eq_ignore_ascii_case("content-length") {
                continue;
            }
            // RFC 9110 section 8.6: a list of identical values may stand for one.
            for part in h.value.split(|&b| b == b',') {
                let Some(n) = content_length(trim(part)) else {
                    return Head::Refused(400, "invalid Content-Length");
                };
                if length.is_some_and(|l| l != n) {
                    return Head::Refused(400, "conflicting Content-Length");
                }
                length = Some(n);
            }
        }
        let body = length.unwrap_or(0);
        if body > self.max_body as u64 {
            return Head::Refused(413, "request body over the limit");
        }
        // `body <= max_body`, a usize.
        Head::Complete(head_len, body as usize)
    }

    fn partial(&self, buf: &[u8]) -> Head {
        if buf.len() > self.max_head {
            Head::Refused(431, "request head too large")
        } else {
            Head::Partial
        }
    }
}

/// What [`HttpFraming::scan_head`] found.
enum Head {
    Partial,
    Complete(usize, usize),
    Refused(u16, &'static str),
}

impl Framing for HttpFraming {
    fn next(&mut self, buf: &[u8]) -> Result<Next, FramingError> {
        let (head_len, body_len) = match self.head {
            Some(h) => h,
            None => match self.scan_head(buf) {
                Head::Complete(h, b) => {
                    self.head = Some((h, b));
                    (h, b)
                }
                Head::Partial => {
                    return Ok(Next::Incomplete {
                        needed: buf.len() + 1,
                    })
                }
                Head::Refused(status, why) => {
                    self.scanned = 0;
                    return Ok(Next::Refused(Refusal {
                        // The loop reads nothing more from this connection: the refusal spans
                        // what there is (never nothing: an empty buffer is only partial).
                        len: buf.len(),
                        status,
                        why,
                    }));
                }
            },
        };
        // head_len <= max_head and body_len <= max_body: no overflow in practice, and
        // saturation would only make the request wait for bytes that never fit.
        let len = head_len.saturating_add(body_len);
        if buf.len() < len {
            return Ok(Next::Incomplete { needed: len });
        }
        self.head = None;
        self.scanned = 0;
        Ok(Next::Message(MessageMeta {
            len,
            body: head_len..len,
            priority: Priority::Normal,
        }))
    }
}

/// The refusal for a request with `Transfer-Encoding: value` (see the module doc).
fn transfer_encoding(value: &[u8], http10: bool) -> Head {
    let codings: Vec<&[u8]> = value.split(|&b| b == b',').map(trim).collect();
    let last = codings.last().copied().unwrap_or_default();
    if http10 || !last.eq_ignore_ascii_case(b"chunked") {
        Head::Refused(400, "request body length cannot be determined")
    } else if codings.len() > 1 {
        Head::Refused(501, "transfer coding not implemented")
    } else {
        Head::Refused(411, "Content-Length required")
    }
}

/// `1*DIGIT` (RFC 9110 section 8.6); a number too large for u64 saturates (and is over any
/// limit).
fn content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &v[start..end.max(start)]
}

/// Where the blank line ending a head (`\n\n` or `\n\r\n`) ends, if `buf` holds one.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(p) = buf[i..].iter().position(|&b| b == b'\n') {
        let at = i + p + 1;
        match buf.get(at..) {
            Some([b'\n', ..]) => return Some(at + 1),
            Some([b'\r', b'\n', ..]) => return Some(at + 2),
            _ => i = at,
        }
    }
    None
}

/// A request cut by [`HttpFraming`], read back from its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The method (`GET`, `POST`, ...).
    pub method: &'a str,
    /// The request target as sent (`/RPC2`, `/a?b`).
    pub path: &'a str,
    /// The minor version: 1 for HTTP/1.1, 0 for HTTP/1.0.
    pub minor_version: u8,
    /// The header fields in order, names as sent.
    pub headers: Vec<(&'a str, &'a [u8])>,
    /// The body (`Content-Length` bytes after the head).
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// Reads the request in `raw` (a whole message of [`HttpFraming`]); `None` when `raw` is not
    /// one (incomplete, or more header fields than any framing accepts).
    pub fn parse(raw: &'a [u8]) -> Option<Request<'a>> {
        let mut fields = [httparse::EMPTY_HEADER; HEADERS_CAP];
        let mut req = httparse::Request::new(&mut fields);
        let httparse::Status::Complete(head_len) = req.parse(raw).ok()? else {
            return None;
        };
        Some(Request {
            method: req.method?,
            path: req.path?,
            minor_version: req.version?,
            headers: req.headers.iter().map(|h| (h.name, h.value)).collect(),
            body: raw.get(head_len..)?,
        })
    }

    /// The first field named `name` (case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| trim(v))
    }

    /// Whether the connection stays open after the answer (RFC 9112 section 9.3): HTTP/1.1
    /// unless `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    pub fn keep_alive(&self) -> bool {
        let has = |token: &[u8]| {
            self.headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
                .flat_map(|(_, v)| v.split(|&b| b == b','))
                .any(|t| trim(t).eq_ignore_ascii_case(token))
        };
        if self.minor_version >= 1 {
            !has(b"close")
        } else {
            has(b"keep-alive")
        }
    }
}

/// The reason phrase of `status` (RFC 9110 section 15), for the codes servers here send.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        410 => "Gone",
        411 => "Length Required",
        413 => "Payload Too Large",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Appends a response to `out`: status line, `Server`, `Content-Type`, `Content-Length`, the
/// `extra` fields (each `Name: value`), `Connection: close` unless `keep_alive`, then `body`.
pub fn write_response(
    out: &mut Vec<u8>,
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    keep_alive: bool,
) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nServer: crawlfleet\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
        reason_phrase(status),
        body.len()
    );
    for (name, value) in extra {
        let _ = write!(out, "{name}: {value}\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
