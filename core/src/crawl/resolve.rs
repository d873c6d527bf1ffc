//! Href resolution without a URL parse for the forms most links take: a path (`/s5/p1.html`), a
//! relative reference made of plain segments (`p5.html`, `../s0/p3.html`, `./`), and an
//! absolute `http://` or `https://` URL whose authority the url crate leaves as written, each
//! with an optional query and fragment. Every other href (other characters, schemes, `//`
//! references, percent signs, white space inside) goes to the url crate, and what this module
//! gives is exactly the url crate's serialization of the same resolution (WHATWG URL parsing:
//! dot segments removed as its path state removes them, the fragment dropped as
//! [`super::links::resolve`] drops it); tested against the url crate on generated hrefs.

use std::cell::RefCell;
use std::collections::HashMap;

use url::{Position, Url};

/// What resolution needs of a page's base URL, taken once per page.
pub(crate) struct FastBase<'a> {
    /// `scheme://[userinfo@]host[:port]`, as the url crate serializes it.
    origin: &'a str,
    /// The base's path without its last segment (`/dir` for `/dir/page.html`; empty for `/x`).
    dir: &'a str,
}

impl<'a> FastBase<'a> {
    /// The fast path for hrefs against `base`; `None` when the base is not an http(s) URL with
    /// a host (every href then takes the url crate).
    pub(crate) fn new(base: &'a Url) -> Option<FastBase<'a>> {
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() || !base.has_host()
        {
            return None;
        }
        let path = base.path();
        Some(FastBase {
            origin: &base[..Position::BeforePath],
            dir: &path[..path.rfind('/')?],
        })
    }

    /// The absolute URL `href` resolves to, fragment removed, as the url crate writes it; `None`
    /// when the href is not of a form this reads (the url crate's then, which may still
    /// resolve it).
    #[cfg(test)]
    pub(crate) fn resolve(&self, href: &str) -> Option<String> {
        let mut out = String::new();
        self.resolve_into(href, &mut out).then_some(out)
    }

    /// [`FastBase::resolve`] into `out` (emptied first; its room kept): true when `out` holds
    /// the URL, false when the href is not of a form this reads (`out`'s content then means
    /// nothing). The extractor resolves every href of a page into one buffer, so that a link
    /// seen before costs no allocation.
    pub(crate) fn resolve_into(&self, href: &str, out: &mut String) -> bool {
        out.clear();
        self.resolve_in(href, out).is_some()
    }

    fn resolve_in(&self, href: &str, out: &mut String) -> Option<()> {
        // Byte searches throughout: every link of every page comes here.
        let href = trim(href);
        let body = match memchr::memchr(b'#', href.as_bytes()) {
            Some(i) => &href[..i],
            None => href,
        };
        let (path, query) = match memchr::memchr(b'?', body.as_bytes()) {
            Some(i) => (&body[..i], Some(&body[i + 1..])),
            None => (body, None),
        };
        if !query.is_none_or(|q| q.bytes().all(query_byte)) {
            return None;
        }
        // `out` is the origin, then the path built segment by segment from `start`.
        let (start, segments) = if let Some(rest) = path
            .strip_prefix("http://")
            .or_else(|| path.strip_prefix("https://"))
        {
            let slash = memchr::memchr(b'/', rest.as_bytes())?;
            let origin = &path[..path.len() - rest.len() + slash];
            if !self.canonical(origin) {
                return None;
            }
            out.reserve(body.len());
            out.push_str(origin);
            (origin.len(), &rest[slash + 1..])
        } else if let Some(abs) = path.strip_prefix('/') {
            if abs.starts_with('/') {
                return None;
            }
            out.reserve(self.origin.len() + body.len());
            out.push_str(self.origin);
            (self.origin.len(), abs)
        } else {
            if path.is_empty() {
                return None;
            }
            out.reserve(self.origin.len() + self.dir.len() + body.len() + 1);
            out.push_str(self.origin);
            out.push_str(self.dir);
            (self.origin.len(), path)
        };
        if !segments.bytes().all(|b| b == b'/' || segment_byte(b)) {
            return None;
        }
        // The segments between slashes (ASCII, checked above: every index is a boundary).
        let mut rest = segments;
        loop {
            let (seg, last) = match memchr::memchr(b'/', rest.as_bytes()) {
                Some(i) => (&rest[..i], false),
                None => (rest, true),
            };
            match seg {
                ".." => {
                    let cut = memchr::memrchr(b'/', &out.as_bytes()[start..])
                        .map_or(start, |i| start + i);
                    out.truncate(cut);
                    if last {
                        out.push('/');
                    }
                }
                "." => {
                    if last {
                        out.push('/');
                    }
                }
                _ => {
                    out.push('/');
                    out.push_str(seg);
                }
            }
            if last {
                break;
            }
            rest = &rest[seg.len() + 1..];
        }
        if out.len() == start {
            out.push('/');
        }
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        Some(())
    }

    /// True when the url crate writes `origin/` (`scheme://authority/`) back as it came: the
    /// authority is already in its normal form (host lower case, IPv4 in dotted decimal, no
    /// default port). Remembered on the thread (a crawl thread sees the same hosts over and
    /// over).
    fn canonical(&self, origin: &str) -> bool {
        CHECKED.with_borrow_mut(|seen| {
            if let Some(&ok) = seen.get(origin) {
                return ok;
            }
            let with_slash = format!("{origin}/");
            let ok = Url::parse(&with_slash).is_ok_and(|u| u.as_str() == with_slash);
            if seen.len() >= CHECKED_THREAD_MAX {
                seen.clear();
            }
            seen.insert(origin.to_string(), ok);
            ok
        })
    }
}

/// Most authorities remembered on a thread; the memory is dropped whole when it is full.
const CHECKED_THREAD_MAX: usize = 4096;

thread_local! {
    /// The verdicts of [`FastBase::canonical`] on this thread.
    static CHECKED: RefCell<HashMap<String, bool, foldhash::fast::RandomState>> =
        RefCell::new(HashMap::default());
}

/// `s.trim()`, without the Unicode test when `s` begins and ends with ASCII that is not white
/// space (the ASCII white space of `trim` is tab, LF, VT, FF, CR and space).
fn trim(s: &str) -> &str {
    let plain = |b: Option<&u8>| {
        b.is_some_and(|&b| {
            b.is_ascii() && !matches!(b, b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r' | b' ')
        })
    };
    if plain(s.as_bytes().first()) && plain(s.as_bytes().last()) {
        s
    } else {
        s.trim()
    }
}

/// A byte the url crate keeps as it is in a path segment of an http(s) URL, and that has no
/// other meaning there (`%`, `\`, `:`, `;` and the rest go to the url crate).
fn segment_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// A byte the url crate keeps as it is in the query of an http(s) URL (the first `?` starts it).
fn query_byte(b: u8) -> bool {
    segment_byte(b) || matches!(b, b'/' | b'?' | b'=' | b'&')
}

/// A page's site as the link store's sitemap line writes it (MS-FSWASDR 2.2.1.3.1.7): the
/// ASCII serialization of the URL's origin and `/`. For an http(s) URL without user info that
/// is the URL's own text up to its path (the url crate writes the host and a port that is not
/// the scheme's default exactly as the origin does), taken without a second parse; anything
/// else asks the url crate for the origin.
pub fn origin_site(u: &Url) -> String {
    if matches!(u.scheme(), "http" | "https")
        && u.has_host()
        && u.username().is_empty()
        && u.password().is_none()
    {
        let head = &u[..Position::BeforePath];
        let mut s = String::with_capacity(head.len() + 1);
        s.push_str(head);
        s.push('/');
        return s;
    }
    format!("{}/", u.origin().ascii_serialization())
}

/// `uri` parsed, the host taken from `origin` (a URL of the same site parsed before) when `uri`
/// is `origin`'s `scheme://[userinfo@]host[:port]` followed by an absolute path: the path and
/// query are then parsed against `origin` (WHATWG URL's relative parse, the url crate's
/// `join`), the host's parse (IDNA mapping, IPv4 reading) not done again. The result is the
/// full parse's: it is kept only when its serialization is `uri` itself (a serialization parses
/// back to the same URL), else `uri` is parsed whole. `origin` is set from the first whole
/// parse. The crawl engine parses every queued URI it requests, all of a site's alike.
pub fn parse_on_site(origin: &mut Option<Url>, uri: &str) -> Option<Url> {
    if let Some(o) = origin.as_ref() {
        let prefix = &o[..Position::BeforePath];
        if let Some(rest) = uri.strip_prefix(prefix) {
            // `//x` and `/\x` would be a new authority, not a path: parsed whole.
            if rest.starts_with('/') && !matches!(rest.as_bytes().get(1), Some(b'/' | b'\\')) {
                if let Ok(u) = o.join(rest) {
                    if u.as_str() == uri {
                        return Some(u);
                    }
                }
            }
        }
    }
    let u = Url::parse(uri).ok()?;
    if origin.is_none() && u.has_host() && !u.cannot_be_a_base() {
        *origin = Some(u.clone());
    }
    Some(u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crawl::links::resolve;

    #[test]
    fn origin_site_is_the_origin_serialized_with_a_slash() {
        for u in [
            "http://h.example/a/b?q#f",
            "https://H.Example:443/x",
            "http://h.example:8080",
            "https://h.example:80/",
            "http://user:pw@h.example:81/p",
            "http://user@h.example/p",
            "http://10.0.0.1:8080/p",
            "http://[::1]:8080/p",
            "http://[::1]/",
            "http://xn--nxasmq6b.example/",
            "http://\u{e9}t\u{e9}.example/p",
            "http://0x7f.1/",
            "ftp://h.example/f",
            "file:///tmp/x",
            "data:text/plain,x",
        ] {
            let parsed = Url::parse(u).unwrap();
            let slow = format!("{}/", parsed.origin().ascii_serialization());
            assert_eq!(origin_site(&parsed), slow, "{u}");
        }
    }

    /// A URI parsed through its site's origin is the url crate's whole parse of it, whatever
    /// the URI: on the origin's authority or not, normalized or not, with paths the relative
    /// parse would read as an authority.
    #[test]
    fn parse_on_site_is_the_whole_parse() {
        let firsts = [
            "http://127.77.0.3:8080/s2/p41.html",
            "http://h.example/",
            "https://user:pw@h.example:8443/a",
            "http://xn--nxasmq6b.example/x?y",
            "http://[::1]:8080/p",
        ];
        let paths = [
            "/",
            "/s5/p1.html",
            "/a?b=c&d",
            "/a#frag",
            "//other.example/x",
            "/\\other.example/x",
            "/./a/../b",
            "/%7Euser/%41",
            "/A B",
            "/caf\u{e9}",
            "/?",
            "",
            ":81/x",
            "/a/..",
        ];
        for first in firsts {
            let mut origin = None;
            let u = parse_on_site(&mut origin, first).unwrap();
            assert_eq!(u, Url::parse(first).unwrap());
            let prefix = origin
                .as_ref()
                .map(|o| o[..Position::BeforePath].to_string())
                .unwrap();
            let mut uris: Vec<String> = paths.iter().map(|p| format!("{prefix}{p}")).collect();
            uris.extend(
                [
                    "http://other.example/a",
                    "HTTP://H.EXAMPLE/x",
                    "mailto:a@b",
                    "not a url",
                ]
                .map(String::from),
            );
            for uri in &uris {
                let want = Url::parse(uri).ok();
                let got = parse_on_site(&mut origin, uri);
                assert_eq!(
                    got.as_ref().map(Url::as_str),
                    want.as_ref().map(Url::as_str),
                    "{uri}"
                );
                assert_eq!(got, want, "{uri}");
                if let Some(g) = got {
                    assert_eq!(g.host_str(), want.as_ref().unwrap().host_str(), "{uri}");
                    assert_eq!(g.port(), want.as_ref().unwrap().port(), "{uri}");
                    assert_eq!(g.username(), want.as_ref().unwrap().username(), "{uri}");
                    assert_eq!(g.query(), want.as_ref().unwrap().query(), "{uri}");
                }
            }
            // The origin is the first URL's, kept.
            assert_eq!(origin.as_ref().map(Url::as_str), Some(u.as_str()));
        }
        // A URI with no host sets no origin.
        let mut origin = None;
        assert!(parse_on_site(&mut origin, "mailto:a@b").is_some());
        assert!(origin.is_none());
    }

    fn slow(base: &Url, href: &str) -> Option<String> {
        resolve(base, href).map(String::from)
    }

    /// The fast path agrees with the url crate on every href it reads, and reads the forms the
    /// synthetic web (and most of the real one) writes.
    #[test]
    fn resolution_is_the_url_crates() {
        let bases = [
            "http://h.example:81/dir/page.html",
            "http://h.example/",
            "https://user:pw@h.example/a/b/",
            "http://127.77.0.1:8080/s5/p117.html?q=1#f",
            "http://h.example/x",
        ];
        let common = [
            "p5.html",
            "../s0/p3.html",
            "./",
            "/s5/p1.html#sec3",
            "/",
            "p5.html#top",
            "http://127.77.0.3:8080/s2/p41.html",
            "http://127.77.0.3:8080/s2/p41.html#sec1",
            "https://other.example/a?x=1&y=2",
            "a/b/../../c/./d",
            "..",
            ".",
            "a/..",
            "../../../../x",
            "q?x=1",
            "  spaced.html ",
        ];
        for b in bases {
            let base = Url::parse(b).unwrap();
            let fast = FastBase::new(&base).unwrap();
            for h in common {
                let got = fast.resolve(h);
                assert!(got.is_some(), "{b} {h}: the fast path reads it");
                assert_eq!(got, slow(&base, h), "{b} {h}");
            }
            let others = [
                "//other.example/x",
                "?only=query",
                "#frag",
                "",
                "mailto:a@b",
                "javascript:void(0)",
                "HTTP://H.EXAMPLE/x",
                "http://h.example:80/x",
                "http://H.example/x",
                "http://127.0.0.01/x",
                "http://h.example",
                "http://h.example?x",
                "http://xn--bcher-kva.example/",
                "http://bücher.example/",
                "a b.html",
                "a%2e%2E/b",
                "a\\b",
                "a\tb",
                "%zz",
                "a:b",
            ];
            for h in others {
                if let Some(got) = fast.resolve(h) {
                    assert_eq!(Some(got), slow(&base, h), "{b} {h}");
                }
            }
            let mut rng = fastrand::Rng::with_seed(28);
            let alphabet: &[&str] = &[
                "a",
                "b.html",
                ".",
                "..",
                "/",
                "?",
                "#",
                "=",
                "&",
                "-",
                "%",
                ":",
                "\\",
                " ",
                "http://",
                "https://",
                "h.example",
                ":81",
                "A",
                "~",
                "@",
                "127.0.0.1",
                "\u{b}",
                "\t",
                "\u{a0}",
                "\u{3000}",
            ];
            let mut buf = String::from("http://left.example/over?from=before");
            for _ in 0..50_000 {
                let n = rng.usize(0..8);
                let h: String = (0..n)
                    .map(|_| alphabet[rng.usize(0..alphabet.len())])
                    .collect();
                let got = fast.resolve(&h);
                // One buffer for every href, as the extractor resolves a page's: what an
                // earlier href left in it changes nothing.
                let reused = fast.resolve_into(&h, &mut buf).then(|| buf.clone());
                assert_eq!(reused, got, "{b} {h:?} after another href");
                if let Some(got) = got {
                    assert_eq!(Some(got), slow(&base, &h), "{b} {h:?}");
                }
            }
        }
        assert!(FastBase::new(&Url::parse("mailto:a@b").unwrap()).is_none());
        // The trim: every byte at either end, and Unicode white space.
        for b in 0..=0x7fu8 {
            for s in [
                format!("{}x", b as char),
                format!("x{}", b as char),
                format!("{0}{0}", b as char),
            ] {
                assert_eq!(trim(&s), s.trim(), "{s:?}");
            }
        }
        for s in [
            "\u{a0}x",
            "x\u{2003}",
            "\u{85}",
            "é",
            "",
            " ",
            "\u{b}x\u{b}",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
        assert!(FastBase::new(&Url::parse("file:///x/y").unwrap()).is_none());
    }
}
