//! Cutting link store messages off a connection (MS-FSWASDR 2.2.1, 3.2.5): a marshal dict,
//! then the terminator `2E 2E 2E 00 00 00 00`.
//!
//! The server "reads the message until it encounters the message terminator". The terminator's
//! bytes may also occur inside a string of the dict (an `eqrepr` URL ending in `...` before
//! NUL bytes, say), so the rule is: an occurrence of the terminator ends the message unless the
//! marshal data before it stops inside a value that goes on through the terminator's bytes, and
//! that value's declared length keeps the message within the size limit. So a string whose
//! declared length covers the terminator is read on (the declared length decides), while
//! bytes that are no marshal data (`this is not marshal data`), data that breaks off at the
//! terminator (`{garbage`), or a string declaring more than the limit end at the first
//! terminator as a message the store answers `failed\n` to, and it reads on.
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

fn is_cut_short(kind: &DecodeErrorKind) -> bool {
    matches!(
        kind,
        DecodeErrorKind::Truncated { .. } | DecodeErrorKind::LengthExceedsInput { .. }
    )
}

/// Whether `with_terminator` (the message's bytes and the terminator's) is the start of a
/// longer marshal value within `max_message` bytes: the terminator's bytes then belong to a
/// value (a string, say) and do not end the message.
fn continues_through(with_terminator: &[u8], max_message: usize) -> bool {
    let limits = Limits {
        max_size: usize::MAX,
        ..Limits::default()
    };
    match marshal::scan(with_terminator, &limits) {
        Err(e) => match e.kind {
            DecodeErrorKind::Truncated { needed } => {
                with_terminator.len().saturating_add(needed) <= max_message
            }
            // The declared length decides, bounded by the limit.
            DecodeErrorKind::LengthExceedsInput { declared, .. } => {
                (e.offset as u64).saturating_add(4).saturating_add(declared) <= max_message as u64
            }
            _ => false,
        },
        Ok(()) => false,
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
            let inside = match marshal::scan(&buf[..end], &limits) {
                Err(e) if is_cut_short(&e.kind) => {
                    continues_through(&buf[..end + TERMINATOR.len()], self.max_message)
                }
                // A whole value, or bytes that are no marshal value at all (answered with
                // `failed\n` by the store, which unmarshals them again).
                _ => false,
            };
            match inside {
                // The terminator's bytes are inside a value: search on.
                true => pos = end + 1,
                false => {
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
    fn bytes_that_break_off_at_the_terminator_end_there() {
        // Each of these used to be read on past its terminator, waiting for up to the size
        // limit of further input: text whose first byte reads as a string type with a length
        // beyond the limit, a dict whose float breaks off in the terminator, a string declaring
        // more than the limit.
        let mut huge = b"s".to_vec();
        huge.extend_from_slice(&(200u32 << 20).to_le_bytes());
        huge.extend_from_slice(b"abc");
        let next = message(b"http://a/");
        for garbage in [
            b"this is not marshal data".to_vec(),
            b"{garbage".to_vec(),
            huge,
        ] {
            let mut stream = garbage.clone();
            stream.extend_from_slice(TERMINATOR);
            stream.extend_from_slice(&next);
            let got = cut_all(&mut WasdrFraming::new(64 << 20), &stream);
            let n = garbage.len();
            assert_eq!(
                got,
                vec![(n + 7, 0..n, false), (next.len(), 0..next.len() - 7, false)],
                "{:?}",
                String::from_utf8_lossy(&garbage)
            );
        }
    }

    #[test]
    fn a_string_whose_declared_length_covers_the_terminator_is_read_on() {
        // `s`, length 20, then 20 bytes holding the terminator: one string, one message.
        let mut body = b"s".to_vec();
        body.extend_from_slice(&20u32.to_le_bytes());
        body.extend_from_slice(b"ab...\0\0\0\0cdefghijklm");
        assert_eq!(body.len(), 25);
        let mut stream = body.clone();
        stream.extend_from_slice(TERMINATOR);
        let got = cut_all(&mut WasdrFraming::new(1 << 20), &stream);
        assert_eq!(got, vec![(body.len() + 7, 0..body.len(), false)]);
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
