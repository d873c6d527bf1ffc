//! What the `wasdr` fuzz target asserts about any input. Shared by the fuzz target
//! (fuzz_targets/wasdr.rs) and tests/fuzz_corpus.rs, which replays the corpus through it.

use std::ops::Range;

use crawlfleet_core::links::TERMINATOR;
use crawlfleet_core::marshal::{self, Value};
use crawlfleet_net::{Framing, Next};
use crawlfleet_shells::linkstore::framing::{is_refusal, WasdrFraming};

/// One message as a framing cut it: bytes used, body range (relative to the message start) and
/// whether it was a refusal.
type Cut = (usize, Range<usize>, bool);

/// Panics when any invariant fails for `data`, taken as a link store connection's input
/// (MS-FSWASDR 2.2.1: marshal dicts, each followed by the terminator `2E 2E 2E 00 00 00 00`). The
/// first byte picks a small size limit (16 to 1036 bytes) so that refusals are reached; the rest
/// is also cut under a limit no input of the fuzzer reaches.
pub fn check(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let small = 16 + 4 * usize::from(first);
    check_stream(stream, small);
    check_stream(stream, 1 << 20);
    check_constructed(stream, small);
    check_constructed(stream, 1 << 20);
}

/// Cuts `stream` all at once and byte by byte, as the slowest network would deliver it, and
/// checks both cuts and that they agree.
fn check_stream(stream: &[u8], max: usize) {
    let (whole, whole_rest) = cut(stream, max, false);
    let (bytewise, bytewise_rest) = cut(stream, max, true);
    // The same messages, up to the first refusal, and a refusal in both or in neither.
    let normal = |c: &[Cut]| -> Vec<Cut> { c.iter().take_while(|m| !m.2).cloned().collect() };
    assert_eq!(
        normal(&whole),
        normal(&bytewise),
        "all at once vs byte by byte"
    );
    let refused_at = |c: &[Cut]| -> Option<usize> {
        let i = c.iter().position(|m| m.2)?;
        Some(c[..i].iter().map(|m| m.0).sum())
    };
    assert_eq!(refused_at(&whole), refused_at(&bytewise), "refusal offset");
    if refused_at(&whole).is_some() {
        // A refused connection swallows everything after the refusal.
        assert_eq!(whole_rest, 0);
        assert_eq!(bytewise_rest, 0);
    } else {
        assert_eq!(
            whole_rest, bytewise_rest,
            "bytes left awaiting a terminator"
        );
    }
}

/// Cuts `stream` with a fresh framing limited to `max`, all at once or byte by byte. Checks each
/// message against the buffer, the terminator and the limit, and that no normal message follows
/// a refusal. Gives the messages and how many bytes were left incomplete at the end.
fn cut(stream: &[u8], max: usize, bytewise: bool) -> (Vec<Cut>, usize) {
    let mut f = WasdrFraming::new(max);
    let mut out: Vec<Cut> = Vec::new();
    let mut at = 0;
    let mut end = if bytewise { 0 } else { stream.len() };
    loop {
        let buf = &stream[at..end];
        match f
            .next(buf)
            .expect("WASDR framing refuses by a refusal message, not an error")
        {
            Next::Message(m) => {
                assert!(m.len > 0, "an empty message would loop forever");
                assert!(
                    m.len <= buf.len(),
                    "message {m:?} beyond the buffer of {}",
                    buf.len()
                );
                assert!(
                    m.body.start <= m.body.end && m.body.end <= m.len,
                    "body {m:?}"
                );
                let refused = is_refusal(m.priority, &buf[m.body.clone()]);
                if let Some(last) = out.last() {
                    assert!(!last.2 || refused, "a normal message after a refusal");
                }
                if !refused {
                    assert_eq!(m.body.start, 0, "{m:?}");
                    assert_eq!(m.len, m.body.end + TERMINATOR.len(), "{m:?}");
                    assert_eq!(&buf[m.body.end..m.len], TERMINATOR, "{m:?}");
                    assert!(
                        m.body.end <= max,
                        "body of {} beyond the limit {max}",
                        m.body.end
                    );
                    // The message ends at the first terminator unless that one lies inside a
                    // marshal value: bytes that scan as one whole value hold no terminator.
                    let body = &buf[m.body.clone()];
                    if let Some(i) = body.windows(TERMINATOR.len()).position(|w| w == TERMINATOR) {
                        assert!(
                            marshal::scan(&body[..i], &unbounded()).is_err(),
                            "a whole value before the terminator at {i} was read on"
                        );
                    }
                }
                out.push((m.len, m.body, refused));
                at += m.len;
            }
            Next::Refused(r) => panic!("the WASDR framing refuses by a message, not {r:?}"),
            Next::Incomplete { needed } => {
                assert!(
                    needed > buf.len(),
                    "needs {needed} with {} at hand",
                    buf.len()
                );
                // Before a refusal no pending message may exceed the limit and its terminator.
                assert!(
                    out.last().is_some_and(|m| m.2) || buf.len() <= max + TERMINATOR.len(),
                    "{} bytes awaited under a limit of {max}",
                    buf.len()
                );
                if end == stream.len() {
                    return (out, stream.len() - at);
                }
                end = if bytewise { end + 1 } else { stream.len() };
            }
        }
    }
}

fn unbounded() -> marshal::Limits {
    marshal::Limits {
        max_size: usize::MAX,
        ..marshal::Limits::default()
    }
}

/// A message whose one string holds the fuzzer's bytes (terminators included) is cut whole when
/// it fits the limit, and the rest of the stream after it is cut as on its own; beyond the limit
/// it is refused or ends at a terminator in its string (see the framing's module doc).
fn check_constructed(stream: &[u8], max: usize) {
    let dict = Value::Dict(vec![(Value::bytes(b"uri"), Value::bytes(stream))]);
    let mut msg = marshal::to_bytes(&dict);
    let body_len = msg.len();
    msg.extend_from_slice(TERMINATOR);
    let mut whole = msg.clone();
    whole.extend_from_slice(stream);
    let (cuts, _) = cut(&whole, max, false);
    if body_len <= max {
        assert_eq!(
            cuts.first(),
            Some(&(msg.len(), 0..body_len, false)),
            "constructed message"
        );
        let (after, _) = cut(stream, max, false);
        assert_eq!(&cuts[1..], &after[..], "the stream after a whole message");
    } else {
        // Over the limit: refused, or (a string declaring more than the limit holds a
        // terminator) cut at that terminator, a message the store answers `failed` to.
        let first = cuts.first().expect("input past the limit is cut");
        assert!(
            first.2 || (first.1.end < body_len && whole[first.1.end..].starts_with(TERMINATOR)),
            "an oversized message is refused or cut at a terminator inside it: {first:?}"
        );
    }
}
