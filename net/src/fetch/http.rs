//! Reading one HTTP/1.1 response from a byte stream: the head with `httparse`, the body framing
//! of RFC 9112 section 6.3, chunked transfer coding (RFC 9112 section 7.1, trailers read and
//! dropped) and gzip / deflate content coding (RFC 9110 section 8.4.1) with the decoded size
//! capped, so a decompression bomb stops at `max_body` bytes.
//!
//! The reader never owns the socket buffer: the connection hands it the unread window, the
//! reader says how much it consumed and whether the response is complete.

use std::io::{self, Write};

use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};

use super::{FetchError, Response};

/// Largest response head (status line and headers), also the per-connection read buffer size:
/// a head that does not fit is refused rather than buffered without bound.
pub(crate) const MAX_HEAD: usize = 32 << 10;
/// Most body bytes reserved up front from a `Content-Length`; the body grows past it as bytes come.
const MAX_RESERVE: usize = 1 << 20;
/// Most header fields in a response head; more is a protocol error.
const MAX_HEADERS: usize = 128;
/// Most trailer fields after the last chunk.
const MAX_TRAILERS: usize = 32;
/// Longest chunk-size line (with extensions) before it counts as garbage.
const MAX_CHUNK_LINE: usize = 4 << 10;

/// How the body's end is found (RFC 9112 section 6.3).
#[derive(Debug)]
enum Framing {
    /// `Content-Length`: this many bytes left.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunk),
    /// Until the server closes the connection.
    Close,
}

/// Where the chunked decoder stands.
#[derive(Debug)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// After the last chunk: trailer fields up to an empty line.
    Trailers,
}

/// A `Vec` that takes at most `cap` bytes; a write past the cap fills it up, sets `full` and
/// then fails, which stops a decoder mid-stream (the decompression-bomb cap).
#[derive(Debug)]
struct Capped {
    buf: Vec<u8>,
    cap: usize,
    full: bool,
}

impl Capped {
    fn put(&mut self, data: &[u8]) -> usize {
        let room = self.cap - self.buf.len();
        let n = room.min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if n < data.len() {
            self.full = true;
        }
        n
    }
}

impl Write for Capped {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.full && !data.is_empty() {
            return Err(io::Error::other("decoded body reached max_body"));
        }
        Ok(self.put(data))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The content coding being removed from the body.
enum Coding {
    Identity(Capped),
    Gzip(Box<GzDecoder<Capped>>),
    Zlib(Box<ZlibDecoder<Capped>>),
    RawDeflate(Box<DeflateDecoder<Capped>>),
    /// "deflate" before its first two bytes arrived: zlib-wrapped (as RFC 9110 says) or raw
    /// (as many servers send it) is decided from the zlib header.
    DeflateSniff(Capped, Vec<u8>),
}

impl std::fmt::Debug for Coding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Coding::Identity(_) => "Identity",
            Coding::Gzip(_) => "Gzip",
            Coding::Zlib(_) => "Zlib",
            Coding::RawDeflate(_) => "RawDeflate",
            Coding::DeflateSniff(..) => "DeflateSniff",
        })
    }
}

/// True when two bytes open a zlib stream (RFC 1950 section 2.2: CM = 8, FCHECK).
fn zlib_header(b0: u8, b1: u8) -> bool {
    b0 & 0x0f == 8 && (u16::from(b0) << 8 | u16::from(b1)) % 31 == 0
}

impl Coding {
    fn sink(&mut self) -> &Capped {
        match self {
            Coding::Identity(c) | Coding::DeflateSniff(c, _) => c,
            Coding::Gzip(d) => d.get_ref(),
            Coding::Zlib(d) => d.get_ref(),
            Coding::RawDeflate(d) => d.get_ref(),
        }
    }

    /// Decodes `data` into the body. `Ok(true)` when the cap was reached.
    fn write(&mut self, data: &[u8]) -> Result<bool, FetchError> {
        let r = match self {
            Coding::Identity(c) => {
                c.put(data);
                return Ok(c.full);
            }
            Coding::Gzip(d) => d.write_all(data),
            Coding::Zlib(d) => d.write_all(data),
            Coding::RawDeflate(d) => d.write_all(data),
            Coding::DeflateSniff(c, head) => {
                head.extend_from_slice(data);
                if head.len() < 2 {
                    return Ok(false);
                }
                let head = std::mem::take(head);
                let out = std::mem::replace(
                    c,
                    Capped {
                        buf: Vec::new(),
                        cap: 0,
                        full: false,
                    },
                );
                *self = if zlib_header(head[0], head[1]) {
                    Coding::Zlib(Box::new(ZlibDecoder::new(out)))
                } else {
                    Coding::RawDeflate(Box::new(DeflateDecoder::new(out)))
                };
                return self.write(&head);
            }
        };
        match r {
            Ok(()) => Ok(self.sink().full),
            Err(_) if self.sink().full => Ok(true),
            Err(e) => Err(FetchError::Decode(e.to_string())),
        }
    }

    /// Ends the stream (checking the gzip trailer) and gives the decoded body.
    fn finish(self, truncated: bool) -> Result<Vec<u8>, FetchError> {
        let decode = |e: io::Error| FetchError::Decode(e.to_string());
        Ok(match self {
            Coding::Identity(c) => c.buf,
            // A cut-off stream is not finished: its trailer never came.
            Coding::Gzip(mut d) if truncated => std::mem::take(&mut d.get_mut().buf),
            Coding::Zlib(mut d) if truncated => std::mem::take(&mut d.get_mut().buf),
            Coding::RawDeflate(mut d) if truncated => std::mem::take(&mut d.get_mut().buf),
            Coding::Gzip(d) => d.finish().map_err(decode)?.buf,
            Coding::Zlib(d) => d.finish().map_err(decode)?.buf,
            Coding::RawDeflate(d) => d.finish().map_err(decode)?.buf,
            Coding::DeflateSniff(c, head) if head.is_empty() => c.buf,
            Coding::DeflateSniff(..) => {
                return Err(FetchError::Decode("deflate body of one byte".into()));
            }
        })
    }
}

/// The parsed head of the final (non-1xx) response.
#[derive(Debug)]
struct Head {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    keep_alive: bool,
}

#[derive(Debug)]
enum State {
    Head,
    Body {
        head: Head,
        framing: Framing,
        coding: Coding,
    },
    Done {
        head: Head,
        coding: Coding,
        truncated: bool,
    },
    Taken,
}

/// Reads one response. Feed it the unread bytes until it reports completion.
#[derive(Debug)]
pub(crate) struct ResponseReader {
    /// The request was HEAD: the response has no body whatever its headers say.
    head_request: bool,
    max_body: usize,
    state: State,
}

/// What [`ResponseReader::feed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fed {
    /// Bytes of the input consumed; the caller drops them from its buffer.
    pub(crate) consumed: usize,
    /// The response is complete.
    pub(crate) done: bool,
}

fn protocol(msg: impl Into<String>) -> FetchError {
    FetchError::Protocol(msg.into())
}

/// True when a comma-separated header value lists `token` (case-insensitive).
fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

impl ResponseReader {
    pub(crate) fn new(head_request: bool, max_body: usize) -> ResponseReader {
        ResponseReader {
            head_request,
            max_body,
            state: State::Head,
        }
    }

    /// Consumes what it can of `buf`.
    pub(crate) fn feed(&mut self, buf: &[u8]) -> Result<Fed, FetchError> {
        let mut pos = 0;
        loop {
            match &mut self.state {
                State::Head => match self.parse_head(&buf[pos..])? {
                    Some(n) => pos += n,
                    None => {
                        return Ok(Fed {
                            consumed: pos,
                            done: false,
                        })
                    }
                },
                State::Body {
                    framing, coding, ..
                } => {
                    let (n, end, truncated) = body_step(framing, coding, &buf[pos..])?;
                    pos += n;
                    if end || truncated {
                        self.finish_body(truncated);
                    } else if n == 0 || pos == buf.len() {
                        return Ok(Fed {
                            consumed: pos,
                            done: false,
                        });
                    }
                }
                State::Done { .. } => {
                    return Ok(Fed {
                        consumed: pos,
                        done: true,
                    })
                }
                State::Taken => return Err(protocol("response read twice")),
            }
        }
    }

    /// The server closed the connection. `Ok(true)` when that completed the response.
    pub(crate) fn eof(&mut self) -> Result<bool, FetchError> {
        match &self.state {
            State::Done { .. } => Ok(true),
            State::Body {
                framing: Framing::Close,
                ..
            } => {
                self.finish_body(false);
                Ok(true)
            }
            State::Body {
                framing: Framing::Length(left),
                ..
            } => Err(FetchError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("connection closed {left} bytes before the end of the body"),
            ))),
            State::Body { .. } => Err(FetchError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed inside a chunked body",
            ))),
            State::Head | State::Taken => Err(FetchError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a complete response head",
            ))),
        }
    }

    /// The finished response and whether the connection may carry another request.
    pub(crate) fn take(&mut self, reused_connection: bool) -> Result<(Response, bool), FetchError> {
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Done {
                head,
                coding,
                truncated,
            } => {
                let body = coding.finish(truncated)?;
                // A cut-off body leaves unread bytes on the wire: the connection cannot be reused.
                let keep_alive = head.keep_alive && !truncated;
                let resp = Response {
                    status: head.status,
                    headers: head.headers,
                    body,
                    truncated,
                    reused_connection,
                    wire: None,
                };
                Ok((resp, keep_alive))
            }
            _ => Err(protocol("response not complete")),
        }
    }

    fn finish_body(&mut self, truncated: bool) {
        if let State::Body { head, coding, .. } = std::mem::replace(&mut self.state, State::Taken) {
            self.state = State::Done {
                head,
                coding,
                truncated,
            };
        }
    }

    /// Parses a head at the start of `buf`: `Some(consumed)` once one is complete (a 1xx
    /// interim response is consumed and skipped), `None` when more bytes are needed.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, FetchError> {
        // Uninitialized slots: httparse initializes the ones it fills, and the 4 KiB of empty
        // headers that `parse_response` wants were written anew for every response.
        let mut fields =
            [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        // Crawled servers are sloppy: accept what browsers accept.
        let status = httparse::ParserConfig::default()
            .allow_spaces_after_header_name_in_responses(true)
            .allow_obsolete_multiline_headers_in_responses(true)
            .allow_multiple_spaces_in_response_status_delimiters(true)
            .parse_response_with_uninit_headers(&mut resp, buf, &mut fields);
        let n = match status {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                return Err(protocol(format!(
                    "response head longer than {MAX_HEAD} bytes"
                )));
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(protocol(format!("bad response head: {e}"))),
        };
        // httparse fills these in on Complete.
        let (Some(code), Some(version)) = (resp.code, resp.version) else {
            return Err(protocol("response head without status"));
        };
        if code == 101 {
            return Err(protocol("unrequested 101 Switching Protocols"));
        }
        if (100..200).contains(&code) {
            return Ok(Some(n)); // RFC 9110 15.2: interim responses are skipped.
        }
        let mut headers = Vec::with_capacity(resp.headers.len());
        let mut length: Option<u64> = None;
        let mut chunked = None;
        let mut conn_close = false;
        let mut conn_keep = false;
        let mut encoding: &[u8] = b"";
        for h in resp.headers.iter() {
            let v = h.value;
            if h.name.eq_ignore_ascii_case("content-length") {
                for part in v.split(|&b| b == b',') {
                    let part = part.trim_ascii();
                    let n = std::str::from_utf8(part)
                        .ok()
                        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(|| protocol("bad Content-Length"))?;
                    if length.is_some_and(|l| l != n) {
                        return Err(protocol("conflicting Content-Length values"));
                    }
                    length = Some(n);
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // RFC 9112 6.3 item 4: chunked only counts as the final coding.
                let last = v.rsplit(|&b| b == b',').next().unwrap_or(b"").trim_ascii();
                chunked = Some(last.eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                conn_close |= has_token(v, "close");
                conn_keep |= has_token(v, "keep-alive");
            } else if h.name.eq_ignore_ascii_case("content-encoding") {
                encoding = v.trim_ascii();
            }
            headers.push((h.name.to_ascii_lowercase(), v.to_vec()));
        }
        let no_body = self.head_request || code == 204 || code == 304;
        let framing = match (no_body, chunked, length) {
            (true, ..) => Framing::Length(0),
            (false, Some(true), _) => Framing::Chunked(Chunk::Size),
            (false, Some(false), _) => Framing::Close,
            (false, None, Some(n)) => Framing::Length(n),
            (false, None, None) => Framing::Close,
        };
        let keep_alive =
            !conn_close && (version == 1 || conn_keep) && !matches!(framing, Framing::Close);
        let reserve = match framing {
            // The server's word alone does not get a large allocation.
            Framing::Length(n) => usize::try_from(n)
                .unwrap_or(usize::MAX)
                .min(self.max_body)
                .min(MAX_RESERVE),
            _ => 0,
        };
        let out = Capped {
            buf: Vec::with_capacity(reserve),
            cap: self.max_body,
            full: false,
        };
        let coding =
            if encoding.eq_ignore_ascii_case(b"gzip") || encoding.eq_ignore_ascii_case(b"x-gzip") {
                Coding::Gzip(Box::new(GzDecoder::new(out)))
            } else if encoding.eq_ignore_ascii_case(b"deflate") {
                Coding::DeflateSniff(out, Vec::new())
            } else {
                // identity, or a coding we did not ask for: the body is kept as sent.
                Coding::Identity(out)
            };
        let head = Head {
            status: code,
            headers,
            keep_alive,
        };
        self.state = match framing {
            Framing::Length(0) => State::Done {
                head,
                coding,
                truncated: false,
            },
            framing => State::Body {
                head,
                framing,
                coding,
            },
        };
        Ok(Some(n))
    }
}

/// One step of body reading: `(consumed, body ended, cap reached)`. Consumes nothing only when
/// more bytes are needed.
fn body_step(
    framing: &mut Framing,
    coding: &mut Coding,
    buf: &[u8],
) -> Result<(usize, bool, bool), FetchError> {
    match framing {
        Framing::Length(left) => {
            let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
            let full = coding.write(&buf[..n])?;
            *left -= n as u64;
            Ok((n, *left == 0, full))
        }
        Framing::Close => {
            let full = coding.write(buf)?;
            Ok((buf.len(), false, full))
        }
        Framing::Chunked(chunk) => chunk_step(chunk, coding, buf),
    }
}

fn chunk_step(
    chunk: &mut Chunk,
    coding: &mut Coding,
    buf: &[u8],
) -> Result<(usize, bool, bool), FetchError> {
    match chunk {
        Chunk::Size => match httparse::parse_chunk_size(buf) {
            Ok(httparse::Status::Complete((n, size))) => {
                *chunk = if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                };
                Ok((n, false, false))
            }
            Ok(httparse::Status::Partial) if buf.len() > MAX_CHUNK_LINE => {
                Err(protocol("chunk-size line too long"))
            }
            Ok(httparse::Status::Partial) => Ok((0, false, false)),
            Err(_) => Err(protocol("bad chunk size")),
        },
        Chunk::Data(left) => {
            let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
            let full = coding.write(&buf[..n])?;
            *left -= n as u64;
            if *left == 0 {
                *chunk = Chunk::DataEnd;
            }
            Ok((n, false, full))
        }
        Chunk::DataEnd => match buf {
            [b'\r', b'\n', ..] => {
                *chunk = Chunk::Size;
                Ok((2, false, false))
            }
            [b'\n', ..] => {
                *chunk = Chunk::Size;
                Ok((1, false, false))
            }
            [] | [b'\r'] => Ok((0, false, false)),
            _ => Err(protocol("chunk data not followed by CRLF")),
        },
        Chunk::Trailers => {
            let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILERS];
            match httparse::parse_headers(buf, &mut fields) {
                Ok(httparse::Status::Complete((n, _))) => Ok((n, true, false)),
                Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
                    Err(protocol("trailer section too long"))
                }
                Ok(httparse::Status::Partial) => Ok((0, false, false)),
                Err(e) => Err(protocol(format!("bad trailer section: {e}"))),
            }
        }
    }
}
