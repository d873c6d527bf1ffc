//! The SITEURL of a page's `sitemap` line (MS-FSWASDR 2.2.1.3.1.7): the origin of the page's
//! URL, as the url crate serializes it, with a closing slash.
//!
//! A page URL the crawler fetched is already in the url crate's serialization, where the site is
//! the URL's own first bytes (`http://host[:port]/`). [`site_url`] returns that prefix when the
//! scheme and authority are ones the url crate leaves as they are (lowercase letters, digits,
//! dots and hyphens in a host that is not an IPv4 number or an IDNA label, a port that is not
//! the scheme's default and has no leading zero); anything else goes through the url crate.

use std::borrow::Cow;

/// `scheme://host[:port]/` of the page URL `page`: the url crate's ASCII serialization of the
/// URL's origin and a `/`. `None` when `page` is not a URL the url crate parses.
pub fn site_url(page: &[u8]) -> Option<Cow<'_, [u8]>> {
    match as_served(page) {
        Some(prefix) => Some(Cow::Borrowed(prefix)),
        None => parsed(page).map(Cow::Owned),
    }
}

/// The general case: the url crate's origin of the page.
fn parsed(page: &[u8]) -> Option<Vec<u8>> {
    let u = url::Url::parse(&String::from_utf8_lossy(page)).ok()?;
    Some(format!("{}/", u.origin().ascii_serialization()).into_bytes())
}

/// The site as the first bytes of `page`, when the url crate would serialize them unchanged.
fn as_served(page: &[u8]) -> Option<&[u8]> {
    let (scheme, default_port): (usize, &[u8]) = if page.starts_with(b"http://") {
        (7, b"80")
    } else if page.starts_with(b"https://") {
        (8, b"443")
    } else {
        return None;
    };
    let rest = &page[scheme..];
    let end = memchr::memchr(b'/', rest)?;
    let authority = &rest[..end];
    let (host, port) = match memchr::memchr(b':', authority) {
        Some(i) => (&authority[..i], Some(&authority[i + 1..])),
        None => (authority, None),
    };
    if !plain_host(host) {
        return None;
    }
    if let Some(p) = port {
        let digits = !p.is_empty() && p.len() <= 5 && p.iter().all(u8::is_ascii_digit);
        if !digits || p[0] == b'0' || p == default_port {
            return None;
        }
        let n = p.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
        if n > u32::from(u16::MAX) {
            return None;
        }
    }
    Some(&page[..scheme + end + 1])
}

/// A host the url crate keeps byte for byte: an IPv4 address as it writes one, or labels of
/// lowercase letters, digits and hyphens, none empty but a final one after a trailing dot, none
/// an IDNA (`xn--`) label, and a last label that does not start with a digit (which could make
/// the host an IPv4 number in another form).
fn plain_host(host: &[u8]) -> bool {
    if canonical_ipv4(host) {
        return true;
    }
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty()
        || !host
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
    {
        return false;
    }
    let mut labels = host.split(|&c| c == b'.');
    let last = labels.next_back().unwrap_or_default();
    !last.is_empty()
        && !last[0].is_ascii_digit()
        && !last.starts_with(b"xn--")
        && labels.all(|l| !l.is_empty() && !l.starts_with(b"xn--"))
}

/// Four decimal numbers from 0 to 255 without leading zeros, separated by single dots: the
/// form the url crate writes an IPv4 address in.
fn canonical_ipv4(host: &[u8]) -> bool {
    let mut parts = 0;
    for part in host.split(|&c| c == b'.') {
        parts += 1;
        let number = matches!(part.len(), 1..=3)
            && part.iter().all(u8::is_ascii_digit)
            && (part.len() == 1 || part[0] != b'0')
            && part.iter().fold(0u16, |v, &d| v * 10 + u16::from(d - b'0')) <= 255;
        if !number || parts > 4 {
            return false;
        }
    }
    parts == 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_page_urls_give_their_own_prefix() {
        for (page, site) in [
            (
                "http://www.fourthcoffee.com/about.html",
                "http://www.fourthcoffee.com/",
            ),
            (
                "https://a-b.example:8443/x?y#z",
                "https://a-b.example:8443/",
            ),
            ("http://h3.example./", "http://h3.example./"),
            (
                "http://127.77.0.1:8080/s5/p117.html",
                "http://127.77.0.1:8080/",
            ),
            ("http://0.0.0.0/", "http://0.0.0.0/"),
        ] {
            let got = site_url(page.as_bytes()).unwrap();
            assert!(matches!(got, Cow::Borrowed(_)), "{page}");
            assert_eq!(got, site.as_bytes(), "{page}");
        }
    }

    #[test]
    fn the_url_crate_decides_the_rest() {
        for (page, site) in [
            (
                "HTTP://WWW.Example.COM:80/a",
                Some("http://www.example.com/"),
            ),
            (
                "https://user:pw@example.com:443/",
                Some("https://example.com/"),
            ),
            ("http://127.1:8080/", Some("http://127.0.0.1:8080/")),
            ("http://[::1]/", Some("http://[::1]/")),
            ("http://ex.com:08080/", Some("http://ex.com:8080/")),
            ("http://ex.com:65536/", None),
            ("mailto:someone@example.com", Some("null/")),
            ("not a url", None),
        ] {
            let got = site_url(page.as_bytes());
            assert_eq!(got.as_deref(), site.map(str::as_bytes), "{page}");
        }
    }

    /// Page URLs put together from parts the url crate treats in every way (kept, rewritten,
    /// refused): the prefix, whenever it is taken, equals the url crate's answer.
    #[test]
    fn equals_the_url_crate_on_generated_urls() {
        let schemes = [
            "http://", "https://", "HTTP://", "ftp://", "http:/", " http://", "file://",
        ];
        let users = ["", "", "", "u@", "u:p@", "@"];
        let hosts = [
            "example.com",
            "www.ex-ample.org",
            "a",
            "Ex.com",
            "h3.example.",
            "a..b",
            ".a",
            "a.",
            "127.0.0.1",
            "1.2.3.4.",
            "0x7f.1",
            "a.0x1",
            "127.77.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "1.2.3.256",
            "01.2.3.4",
            "1.2.3",
            "1.2.3.4.5",
            "4294967295",
            "1.2.3.0x4",
            "1..2.3",
            "1.2.3.4 ",
            "10.0.0.00",
            "1.2.3.010",
            "a.1b",
            "b1.a",
            "xn--bcher-kva.example",
            "xn--a.example",
            "a.xn--p1ai",
            "[::1]",
            "ex_ample.com",
            "\u{e9}t\u{e9}.example",
            "",
            "a-.-b",
            "ex%41.com",
            "a\tb.com",
        ];
        let ports = [
            "", "", ":80", ":443", ":8080", ":0", ":08080", ":65535", ":65536", ":", ":1a",
            ":99999",
        ];
        let paths = ["/", "/a/b.html", "", "?q=/x", "#f", "\\x", "/%zz", "/ sp"];
        let mut rng = fastrand::Rng::with_seed(0x28_0003);
        let pick = |rng: &mut fastrand::Rng, v: &[&'static str]| v[rng.usize(..v.len())];
        let mut fast = 0;
        for _ in 0..60_000 {
            let page = [
                pick(&mut rng, &schemes),
                pick(&mut rng, &users),
                pick(&mut rng, &hosts),
                pick(&mut rng, &ports),
                pick(&mut rng, &paths),
            ]
            .concat();
            let want = parsed(page.as_bytes());
            let got = site_url(page.as_bytes());
            assert_eq!(got.as_deref(), want.as_deref(), "{page:?}");
            fast += usize::from(matches!(got, Some(Cow::Borrowed(_))));
        }
        assert!(fast > 300, "the prefix was taken {fast} times");
    }
}
