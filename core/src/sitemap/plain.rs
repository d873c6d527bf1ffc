//! `<loc>`s the URL parser would give back unchanged, told in one pass over their bytes, so that
//! reading a sitemap of such URLs (nearly every sitemap) needs no full parse per URL.
//!
//! A plain URL is `http://` or `https://`, a host, an optional port, a path starting with `/`,
//! an optional query and no fragment, where:
//! - the host is lower-case labels of letters, digits and `-`, separated by single dots, none
//!   starting with `xn--` (the parser checks Punycode), and, when its last label is a number
//!   (the WHATWG "ends in a number" rule), a dotted quad of four decimal octets without leading
//!   zeros, which the IPv4 parser writes back as it was;
//! - the port, when there is one, is decimal without a leading zero, at most 65535 and not the
//!   scheme's default (which the parser drops);
//! - the path and query hold only unreserved characters, sub-delimiters (the query no `'`,
//!   which the parser escapes there), `:`, `@`, `/` (and `?` in the query), and `%` followed
//!   by two hex digits; no path segment is `.` or `..` and no `%2e` appears (the parser
//!   resolves dot segments).
//!
//! Anything else goes through the URL parser, as before: this only spares the parse where it
//! would change nothing (the tests hold the two side by side).

/// The length of the origin (`scheme://host[:port]`) of `s` when it is a plain URL.
pub(super) fn plain_url(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let (start, default_port) = if b.starts_with(b"http://") {
        (7, &b"80"[..])
    } else if b.starts_with(b"https://") {
        (8, &b"443"[..])
    } else {
        return None;
    };
    let origin = start + authority(&b[start..], default_port)?;
    let rest = &b[origin..];
    if rest.first() != Some(&b'/') {
        return None;
    }
    let (path, query) = match rest.iter().position(|&c| c == b'?') {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    if !escapes_ok(path, b"")
        || path
            .split(|&c| c == b'/')
            .any(|seg| seg == b"." || seg == b"..")
    {
        return None;
    }
    if let Some(q) = query {
        if !escapes_ok(q, b"?") || q.contains(&b'\'') {
            return None;
        }
    }
    Some(origin)
}

/// The length of a plain `host[:port]` at the start of `a`, up to the path.
fn authority(a: &[u8], default_port: &[u8]) -> Option<usize> {
    let end = a
        .iter()
        .position(|&c| c == b'/' || c == b'?' || c == b'#')
        .unwrap_or(a.len());
    let auth = &a[..end];
    let (host, port) = match auth.iter().position(|&c| c == b':') {
        Some(i) => (&auth[..i], Some(&auth[i + 1..])),
        None => (auth, None),
    };
    let mut labels = 0;
    for label in host.split(|&c| c == b'.') {
        let ok = !label.is_empty()
            && label
                .iter()
                .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && !label.starts_with(b"xn--");
        if !ok {
            return None;
        }
        labels += 1;
    }
    let last = host.rsplit(|&c| c == b'.').next()?;
    let numeric = last.iter().all(u8::is_ascii_digit) || last.starts_with(b"0x");
    let octet = |p: &[u8]| {
        (1..=3).contains(&p.len())
            && (p.len() == 1 || p[0] != b'0')
            && p.iter().all(u8::is_ascii_digit)
            && std::str::from_utf8(p)
                .ok()
                .and_then(|t| t.parse::<u16>().ok())
                .is_some_and(|v| v <= 255)
    };
    if numeric && !(labels == 4 && host.split(|&c| c == b'.').all(octet)) {
        return None;
    }
    if let Some(p) = port {
        let ok = (1..=5).contains(&p.len())
            && p[0] != b'0'
            && p.iter().all(u8::is_ascii_digit)
            && p != default_port
            && std::str::from_utf8(p)
                .ok()
                .and_then(|t| t.parse::<u32>().ok())
                .is_some_and(|v| v <= 65_535);
        if !ok {
            return None;
        }
    }
    Some(end)
}

/// True when `part` holds only the characters a plain path (with `extra`, a query) may, and
/// each `%` starts a two-digit escape other than `%2e`.
fn escapes_ok(part: &[u8], extra: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&c) = part.get(i) {
        let ok =
            c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&c) || extra.contains(&c);
        if c == b'%' {
            let hex = part.get(i + 1..i + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
                || hex.is_some_and(|h| h.eq_ignore_ascii_case(b"2e"))
            {
                return false;
            }
            i += 3;
            continue;
        }
        if !ok {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::plain_url;
    use url::Url;

    /// Whenever a URL is plain, the parser gives it back byte for byte, with the same origin.
    fn agrees(s: &str) {
        if let Some(n) = plain_url(s) {
            let u = Url::parse(s).unwrap_or_else(|e| panic!("{s:?} is plain but {e}"));
            assert_eq!(u.as_str(), s, "{s:?}");
            assert_eq!(u.origin().ascii_serialization(), s[..n], "{s:?}");
        }
    }

    #[test]
    fn plain_urls_are_what_the_parser_writes() {
        for s in [
            "http://example.com/",
            "http://example.com/a/b.html",
            "https://www.example.com:8443/a?b=c&d=e",
            "http://127.0.0.1:8080/x/y.html",
            "http://10.1.2.3/",
            "http://a-b.c-d.example/~u/%41%7e/p;q=1",
            "http://h/a//b",
            "http://h/a?x=1?y=2/z",
        ] {
            assert!(plain_url(s).is_some(), "{s:?}");
            agrees(s);
        }
    }

    #[test]
    fn what_the_parser_would_change_is_not_plain() {
        for s in [
            "HTTP://example.com/",
            "http://Example.com/",
            "http://example.com",
            "http://example.com:80/",
            "https://example.com:443/",
            "http://example.com:080/",
            "http://example.com:/",
            "http://example.com:99999/",
            "http://1.2.3/",
            "http://01.2.3.4/",
            "http://1.2.3.256/",
            "http://0x7f.0.0.1/",
            "http://foo.123/",
            "http://example.com./",
            "http://.example.com/",
            "http://a..b/",
            "http://xn--nxasmq6b.com/",
            "http://user@example.com/",
            "http://[::1]/",
            "http://h/a/./b",
            "http://h/a/../b",
            "http://h/a/..",
            "http://h/a/%2e%2E/b",
            "http://h/a b",
            "http://h/a\\b",
            "http://h/a#frag",
            "http://h/a?b='c'",
            "http://h/%zz",
            "http://h/%4",
            "http://h/a|b",
            "http://h/a^b",
            "http://h/é",
            "ftp://h/",
            "http://h/a\tb",
        ] {
            assert!(plain_url(s).is_none(), "{s:?}");
        }
    }

    /// Strings drawn from the characters that matter: wherever the fast reading says plain,
    /// the parser agrees.
    #[test]
    fn random_urls_agree_with_the_parser() {
        let alphabet: &[&str] = &[
            "a", "Z", "0", "9", "-", ".", "..", "/", "//", ":", "%", "%2e", "%41", "?", "#", "'",
            "~", "@", "xn--", "127", "255", "256", "0x", " ", "\\", "é", ";", "=", "&",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut plain = 0;
        for _ in 0..20_000 {
            let mut s = String::from(if next() % 2 == 0 {
                "http://"
            } else {
                "https://"
            });
            let n = 1 + next() % 12;
            for _ in 0..n {
                s.push_str(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            let at = s.len().min(12);
            if next() % 3 == 0 && s.is_char_boundary(at) {
                s.insert(at, '/');
            }
            plain += usize::from(plain_url(&s).is_some());
            agrees(&s);
        }
        assert!(plain > 100, "only {plain} plain URLs drawn");
    }
}
