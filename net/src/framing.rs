//! Cutting messages off a connection's read buffer: the [`Framing`] trait and its FSCMT
//! implementation (MS-FSCMT 2.2.1: a 4-byte big-endian length, then a marshal `(dict, 0|1)`).
//!
//! The event loop is not FSCMT-only: the link-store protocol (MS-FSWASDR: a bare marshal dict
//! ended by `2E 2E 2E 00 00 00 00`) and HTTP requests ([`crate::http::HttpFraming`]) fit the
//! same trait. A framing that must answer input it cannot frame (HTTP's 400, 413, 431) reports
//! it with [`Next::Refused`] instead of an error, so the role answers before the close.

use std::fmt;
use std::ops::Range;

use crawlfleet_core::frame::{self, FrameError, Priority};
use crawlfleet_core::marshal::Limits;

/// Where one complete message sits at the front of the buffer given to [`Framing::next`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageMeta {
    /// Bytes the message occupies from the start of the buffer (header and trailer included).
    pub len: usize,
    /// The payload within those bytes (for FSCMT: the marshal body after the length header).
    pub body: Range<usize>,
    /// The message priority (framings without one report [`Priority::Normal`]).
    pub priority: Priority,
}

/// What [`Framing::next`] found at the front of the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A complete, validated message.
    Message(MessageMeta),
    /// Not a whole message yet.
    Incomplete {
        /// How many bytes, counted from the start of the buffer, the message needs at least. A
        /// framing that knows the exact size (a length prefix) gives it, so the read buffer grows
        /// to exactly that; one that does not gives `buf.len() + 1`. The framing has already
        /// checked this against its size limit.
        needed: usize,
    },
    /// The input cannot be framed, but the peer is owed an answer saying why (an HTTP status).
    /// The loop delivers it as the connection's last message (see
    /// [`FrameBatch::refusal`](crate::FrameBatch::refusal)) and reads nothing more from it; the
    /// role answers, then closes the connection.
    Refused(Refusal),
}

/// Input a framing refuses with a status for the peer: see [`Next::Refused`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Bytes of the buffer the refused input spans (at least 1; the loop discards what
    /// follows).
    pub len: usize,
    /// The status to answer with (for HTTP: 400, 411, 413, 431, 501).
    pub status: u16,
    /// Why, for the answer and the log line.
    pub why: &'static str,
}

/// Why a framing refused a connection's input. The loop closes that connection only.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FramingError {
    /// The message announces (or has grown to) more than the configured maximum.
    Oversized {
        /// The announced or accumulated length.
        len: usize,
        /// The configured maximum.
        limit: usize,
    },
    /// An FSCMT frame whose body is not a valid marshal `(dict, 0|1)` tuple.
    Fscmt(FrameError),
    /// The framing broke its own contract (a [`MessageMeta`] outside the buffer). A bug in the
    /// framing, not in the peer; the loop closes the connection instead of trusting it.
    Contract(&'static str),
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FramingError::Oversized { len, limit } => {
                write!(f, "frame length {len} exceeds the limit of {limit} bytes")
            }
            FramingError::Fscmt(e) => write!(f, "undecodable frame: {e}"),
            FramingError::Contract(why) => write!(f, "framing contract broken: {why}"),
        }
    }
}

impl std::error::Error for FramingError {}

impl From<FrameError> for FramingError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::TooLarge { len, limit } => FramingError::Oversized { len, limit },
            other => FramingError::Fscmt(other),
        }
    }
}

/// Cuts complete messages off the front of a connection's read buffer and validates them.
///
/// Each connection gets its own clone, so a framing may keep per-connection state (how far it
/// has already scanned for a terminator, for instance). The loop calls [`Framing::next`] on the
/// unconsumed bytes, drops `len` bytes after each [`Next::Message`], and calls again.
pub trait Framing: Clone + Send + 'static {
    /// Looks at the unconsumed bytes at the front of a read buffer. Must not panic on any input,
    /// and must refuse a message that would exceed its size limit before asking for its bytes.
    fn next(&mut self, buf: &[u8]) -> Result<Next, FramingError>;
}

/// FSCMT framing (MS-FSCMT 2.2.1): [`frame::split`] to cut the frame (the length header is checked
/// against `limits.max_size` before the body is awaited) and [`frame::scan_body`] to validate the
/// body without allocating.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FscmtFraming {
    /// Depth and size limits; `max_size` bounds a frame body.
    pub limits: Limits,
}

impl FscmtFraming {
    /// FSCMT framing with the given limits.
    pub fn new(limits: Limits) -> Self {
        FscmtFraming { limits }
    }
}

impl Framing for FscmtFraming {
    fn next(&mut self, buf: &[u8]) -> Result<Next, FramingError> {
        cut_fscmt(buf, &self.limits, |body| {
            Ok(frame::scan_body(body, &self.limits)?)
        })
    }
}

/// FSCMT framing by the length header alone (MS-FSCMT 2.2.1; the header is checked against
/// `limits.max_size` before the body is awaited, as in [`FscmtFraming`]), for a role that decodes
/// every frame itself and refuses an undecodable one on its own terms: the loop then reads each
/// body once instead of twice. Every message is reported at [`Priority::Normal`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FscmtLengthFraming {
    /// `max_size` bounds a frame body.
    pub limits: Limits,
}

impl Framing for FscmtLengthFraming {
    fn next(&mut self, buf: &[u8]) -> Result<Next, FramingError> {
        cut_fscmt(buf, &self.limits, |_| Ok(Priority::Normal))
    }
}

/// Cuts the FSCMT frame at the front of `buf`; `priority` checks a whole frame's body.
fn cut_fscmt(
    buf: &[u8],
    limits: &Limits,
    priority: impl FnOnce(&[u8]) -> Result<Priority, FramingError>,
) -> Result<Next, FramingError> {
    match frame::split(buf, limits)? {
        Some((body, consumed)) => Ok(Next::Message(MessageMeta {
            len: consumed,
            body: frame::HEADER_LEN..consumed,
            priority: priority(body)?,
        })),
        None => {
            let needed = match buf.get(..frame::HEADER_LEN) {
                // `split` has checked the announced length against the limit.
                Some(h) => {
                    frame::HEADER_LEN + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize
                }
                None => frame::HEADER_LEN,
            };
            Ok(Next::Incomplete { needed })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawlfleet_core::marshal::Value;

    fn frame(priority: Priority) -> Vec<u8> {
        let dict = vec![(Value::bytes(b"cmd"), Value::int(7))];
        let mut out = Vec::new();
        frame::encode_dict(&dict, priority, &mut out);
        out
    }

    #[test]
    fn cuts_whole_frames_and_reports_priority() {
        let mut buf = frame(Priority::High);
        let first = buf.len();
        buf.extend(frame(Priority::Normal));
        let mut f = FscmtFraming::default();
        let Next::Message(m) = f.next(&buf).unwrap() else {
            panic!("expected a message")
        };
        assert_eq!(m.len, first);
        assert_eq!(m.body, 4..first);
        assert_eq!(m.priority, Priority::High);
        let Next::Message(m) = f.next(&buf[first..]).unwrap() else {
            panic!("expected a message")
        };
        assert_eq!(m.priority, Priority::Normal);
    }

    #[test]
    fn incomplete_reports_exact_need() {
        let buf = frame(Priority::Normal);
        let mut f = FscmtFraming::default();
        assert_eq!(f.next(&buf[..2]), Ok(Next::Incomplete { needed: 4 }));
        assert_eq!(
            f.next(&buf[..buf.len() - 1]),
            Ok(Next::Incomplete { needed: buf.len() })
        );
    }

    #[test]
    fn oversized_header_is_refused_before_the_body() {
        let mut f = FscmtFraming::default();
        let err = f.next(&100_000_000u32.to_be_bytes()).unwrap_err();
        assert_eq!(
            err,
            FramingError::Oversized {
                len: 100_000_000,
                limit: Limits::DEFAULT_MAX_SIZE
            }
        );
        assert_eq!(
            err.to_string(),
            "frame length 100000000 exceeds the limit of 67108864 bytes"
        );
    }

    #[test]
    fn length_framing_cuts_by_the_header_only_and_keeps_the_limit() {
        let mut buf = frame(Priority::High);
        let first = buf.len();
        buf.extend_from_slice(&5u32.to_be_bytes());
        buf.extend_from_slice(b"\xffjunk");
        let mut f = FscmtLengthFraming::default();
        assert_eq!(
            f.next(&buf),
            Ok(Next::Message(MessageMeta {
                len: first,
                body: 4..first,
                priority: Priority::Normal
            }))
        );
        // The body is the role's to decode (and refuse).
        assert_eq!(
            f.next(&buf[first..]),
            Ok(Next::Message(MessageMeta {
                len: 9,
                body: 4..9,
                priority: Priority::Normal
            }))
        );
        assert_eq!(
            f.next(&buf[first..first + 6]),
            Ok(Next::Incomplete { needed: 9 })
        );
        assert_eq!(
            f.next(&100_000_000u32.to_be_bytes()),
            Err(FramingError::Oversized {
                len: 100_000_000,
                limit: Limits::DEFAULT_MAX_SIZE
            })
        );
    }

    #[test]
    fn garbage_body_is_refused() {
        let mut buf = 5u32.to_be_bytes().to_vec();
        buf.extend_from_slice(b"\xffjunk");
        let mut f = FscmtFraming::default();
        assert!(matches!(f.next(&buf), Err(FramingError::Fscmt(_))));
    }
}
