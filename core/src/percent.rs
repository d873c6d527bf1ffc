//! Strict `%XX` decoding, shared by the link store's log file names and the RUP server's
//! request paths: every `%` must start two hex digits, so a malformed escape is refused rather
//! than passed through.

/// Decodes the `%XX` escapes of `s`; `None` for a `%` not followed by two hex digits.
///
/// ```
/// use crawlfleet_core::percent::percent_decode;
/// assert_eq!(percent_decode("/a%20b%2F"), Some(b"/a b/".to_vec()));
/// assert_eq!(percent_decode("/a%2"), None);
/// assert_eq!(percent_decode("/a%zz"), None);
/// ```
pub fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}
