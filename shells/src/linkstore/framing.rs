//! Cutting link store messages off a connection (MS-FSWASDR 2.2.1, 3.2.5): a marshal dict,
//! then the terminator `2E 2E 2E 00 00 00 00`.
//!
//! The server "reads the message until it encounters the message terminator". The terminator's
//! bytes may also occur inside a string of the dict (an `eqrepr` URL ending in `...` before
//! NUL bytes, say), so an occurrence ends the message only when the bytes before it are one
//! complete marshal value; when they stop inside a string, the search goes on. Bytes before a
//! terminator that are not marshal data at all (an unknown type code, say) are a message too:
//! the store answers `failed\n` to it and reads on.
//!
//! A message that grows past the size limit without a terminator is refused: the framing
//! reports one *refusal* (an empty body with [`Priority::High`], which a WASDR message never
//! has: the protocol has no priorities) and swallows the rest of the connection's input, so
//! that the store answers `failed\n` after the answers it owes for earlier messages and closes
//! the connection.

use crawlfleet_core::links::TERMINATOR;
use crawlfleet_core::marshal::{self, DecodeErrorKind, Limits};
use crawlfleet_net::{Framing, FramingError, MessageMeta, Next, Priority};
use memchr::memmem;

/// WASDR framing, one per connection.
#[derive(Clone, Debug)]
pub struct WasdrFraming {
    max_message: usize,
    /// Bytes of the current message already searched for the terminator.
    scanned: usize,
    /// The current message was refused; everything after it is swallowed.
    refused: bool,
}

impl WasdrFraming {
    /// A framing refusing messages longer than `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        WasdrFraming {
            max_message,
            scanned: 0,
            refused: false,
        }
    }
}

/// True for a refusal reported by [`WasdrFraming`] (see the module doc).
pub fn is_refusal(priority: Priority, body: &[u8]) -> bool {
    priority == Priority::High && body.is_empty()
}

fn refusal(len: usize) -> Next {
    Next::Message(MessageMeta {
        len,
        body: 0..0,
        priority: Priority::High,
    })
}

impl Framing for WasdrFraming {
    fn next(&mut self, buf: &[u8]) -> Result<Next, FramingError> {
        if self.refused {
            return Ok(if buf.is_empty() {
                Next::Incomplete { needed: 1 }
            } else {
                refusal(buf.len())
            });
        }
        let limits = Limits {
            max_size: usize::MAX,
            ..Limits::default()
        };
        // Resume where the last call stopped, minus a terminator that may straddle the end.
        let mut pos = self.scanned.saturating_sub(TERMINATOR.len() - 1);
        while let Some(i) = memmem::find(&buf[pos..], TERMINATOR) {
            let end = pos + i;
            if end > self.max_message {
                break;
            }
            match marshal::scan(&buf[..end], &limits) {
                Err(e)
                    if matches!(
                        e.kind,
                        DecodeErrorKind::Truncated { .. }
                            | DecodeErrorKind::LengthExceedsInput { .. }
                    ) =>
                {
                    // The terminator's bytes are inside a string: search on.
                    pos = end + 1;
                }
                // A whole value, or bytes that are no marshal value at all (answered with
                // `failed\n` by the store, which unmarshals them again).
                _ => {
                    self.scanned = 0;
                    return Ok(Next::Message(MessageMeta {
                        len: end + TERMINATOR.len(),
                        body: 0..end,
                        priority: Priority::Normal,
                    }));
                }
            }
        }
        if buf.len() > self.max_message + TERMINATOR.len() || pos > self.max_message {
            self.refused = true;
            self.scanned = 0;
            return Ok(refusal(buf.len()));
        }
        self.scanned = buf.len();
        Ok(Next::Incomplete {
            needed: buf.len() + 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawlfleet_core::links::{Message, WebAnalyzerBatch};

    fn message(url: &[u8]) -> Vec<u8> {
        let mut b = WebAnalyzerBatch::default();
        b.urimap(url).unwrap();
        Message::webanalyzer(b"c", &b).to_wire()
    }

    fn cut_all(f: &mut WasdrFraming, stream: &[u8]) -> Vec<(usize, std::ops::Range<usize>, bool)> {
        let mut out = Vec::new();
        let mut at = 0;
        // Feed byte by byte, as the slowest network would.
        let mut end = 0;
        while end <= stream.len() {
            match f.next(&stream[at..end]).unwrap() {
                Next::Message(m) => {
                    out.push((
                        m.len,
                        m.body.clone(),
                        is_refusal(m.priority, &stream[at..at + m.body.end]),
                    ));
                    at += m.len;
                }
                Next::Incomplete { needed } => {
                    assert!(needed > end - at);
                    end += 1;
                }
                Next::Refused(r) => panic!("the WASDR framing reports no Next::Refused: {r:?}"),
            }
        }
        out
    }

    #[test]
    fn messages_are_cut_at_their_terminator_even_when_a_string_holds_one() {
        let a = message(b"http://a/x...");
        // This URL holds the terminator's bytes (a URL holds no NUL when built by our client,
        // but the framing must not depend on that).
        let tricky_url = b"http://a/...\0\0\0\0";
        let mut b = WebAnalyzerBatch::default();
        b.sitemap(b"http://a/", b"http://a/").unwrap();
        let plain = Message::webanalyzer(b"c", &b).to_wire();
        let dict = crawlfleet_core::marshal::Value::Dict(vec![(
            crawlfleet_core::marshal::Value::bytes(b"x"),
            crawlfleet_core::marshal::Value::bytes(tricky_url),
        )]);
        let mut c = marshal::to_bytes(&dict);
        c.extend_from_slice(TERMINATOR);
        let garbage = b"\xffnot marshal...\0\0\0\0".to_vec();
        let stream = [a.clone(), c.clone(), garbage.clone(), plain.clone()].concat();
        let got = cut_all(&mut WasdrFraming::new(1 << 20), &stream);
        assert_eq!(
            got,
            vec![
                (a.len(), 0..a.len() - 7, false),
                (c.len(), 0..c.len() - 7, false),
                (garbage.len(), 0..garbage.len() - 7, false),
                (plain.len(), 0..plain.len() - 7, false),
            ]
        );
    }

    #[test]
    fn an_endless_message_is_refused_once_and_the_rest_swallowed() {
        let mut f = WasdrFraming::new(200);
        let ok = message(b"http://a/");
        assert!(ok.len() < 200);
        let mut stream = ok.clone();
        stream.extend(std::iter::repeat_n(b'x', 500));
        let got = cut_all(&mut f, &stream);
        assert_eq!(got[0], (ok.len(), 0..ok.len() - 7, false));
        assert!(got[1].2, "a refusal follows");
        assert_eq!(got[1].0, 208);
        // After the refusal every further byte is swallowed as refusals.
        assert!(got[2..].iter().all(|m| m.2));
        assert_eq!(got.iter().map(|m| m.0).sum::<usize>(), stream.len());
    }

    #[test]
    fn a_message_longer_than_the_limit_is_refused_even_with_its_terminator() {
        let big = message(&[b'u'; 200]);
        let mut f = WasdrFraming::new(100);
        match f.next(&big).unwrap() {
            Next::Message(m) => assert!(is_refusal(m.priority, &big[m.body])),
            other => panic!("{other:?}"),
        }
    }
}
