//! Link extraction from HTML over the tag set of MS-FSCMT 2.2.2.3.3, selected by a collection's
//! `link_extraction` mask, with `<base href>`, `<meta name="robots">` and
//! `<meta http-equiv="refresh">`. The tokenizer is html5gum's (WHATWG tokenization, streaming
//! callbacks over borrowed bytes); resolution and normalization are the url crate's.

use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
use html5gum::{Span, Tokenizer};
use url::Url;

/// The link_extraction keys of MS-FSCMT 2.2.2.3.3.
pub mod tags {
    /// `<a href>`.
    pub const A: u32 = 0x1;
    /// `<form action>`.
    pub const ACTION: u32 = 0x2;
    /// `<area href>`.
    pub const AREA: u32 = 0x4;
    /// URIs in HTML comments.
    pub const COMMENT: u32 = 0x10;
    /// `<frame src>`, `<iframe src>`.
    pub const FRAME: u32 = 0x20;
    /// WML `<go href>`.
    pub const GO: u32 = 0x40;
    /// `<img src>`.
    pub const IMG: u32 = 0x80;
    /// `<layer src>`.
    pub const LAYER: u32 = 0x100;
    /// `<link href>`.
    pub const LINK: u32 = 0x200;
    /// URIs in `<meta content>`.
    pub const META: u32 = 0x400;
    /// `<script src>`.
    pub const SCRIPT: u32 = 0x800;
    /// `<object data>`, `<applet code>`.
    pub const OBJECT: u32 = 0x4000;
    /// `<meta http-equiv="refresh">` targets.
    pub const META_REFRESH: u32 = 0x8000;
    /// `<embed src>`.
    pub const EMBED: u32 = 0x100000;
}

/// A link found in a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The absolute URI, fragment removed.
    pub url: String,
    /// The anchor text (`<a>` only), white space collapsed.
    pub text: String,
    /// The link_extraction key of the tag it came from.
    pub tag: u32,
}

/// What a document says about its links and itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// Links in document order, each URI once.
    pub links: Vec<Link>,
    /// `<meta name="robots" content="noindex">` (or `none`).
    pub noindex: bool,
    /// `<meta name="robots" content="nofollow">` (or `none`).
    pub nofollow: bool,
    /// The `<meta http-equiv="refresh">` target, resolved.
    pub refresh: Option<String>,
}

/// Longest anchor text kept, in bytes.
const MAX_ANCHOR: usize = 256;
/// Most links kept from one document.
pub const MAX_LINKS: usize = 10_000;

/// The tags whose attributes [`State::close_tag`] reads; the attributes of every other tag
/// are not collected (most of a page's tags and attributes are of no interest, and copying
/// each one cost an allocation or two).
fn tag_wanted(tag: &[u8]) -> bool {
    matches!(
        tag,
        b"a" | b"base"
            | b"form"
            | b"area"
            | b"frame"
            | b"iframe"
            | b"go"
            | b"img"
            | b"layer"
            | b"link"
            | b"script"
            | b"object"
            | b"applet"
            | b"embed"
            | b"meta"
    )
}

/// The attributes [`State::close_tag`] reads (of the tags [`tag_wanted`] names).
fn attr_wanted(name: &[u8]) -> bool {
    matches!(
        name,
        b"href" | b"src" | b"action" | b"data" | b"code" | b"name" | b"http-equiv" | b"content"
    )
}

#[derive(Default)]
struct State {
    tag: Vec<u8>,
    /// The open start tag is one of [`tag_wanted`]'s.
    want_tag: bool,
    /// The attribute being read is one of [`attr_wanted`]'s, pushed on `attrs`.
    want_attr: bool,
    attr: Vec<u8>,
    attrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Index into `out.links` of the open `<a>` collecting text.
    open_anchor: Option<usize>,
    anchor_text: String,
    base: Option<Url>,
    comments: Vec<Vec<u8>>,
    raw: Vec<(u32, Vec<u8>)>,
    anchors: Vec<(usize, String)>,
    meta_robots: Vec<Vec<u8>>,
    meta_refresh: Option<Vec<u8>>,
}

fn attr<'a>(attrs: &'a [(Vec<u8>, Vec<u8>)], name: &[u8]) -> Option<&'a [u8]> {
    attrs
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

impl State {
    fn close_tag(&mut self, mask: u32) {
        let tag = std::mem::take(&mut self.tag);
        let attrs = std::mem::take(&mut self.attrs);
        let push = |this: &mut State, key: u32, name: &[u8]| {
            if mask & key != 0 {
                if let Some(v) = attr(&attrs, name) {
                    this.raw.push((key, v.to_vec()));
                }
            }
        };
        match tag.as_slice() {
            b"a" if mask & tags::A != 0 => {
                if let Some(v) = attr(&attrs, b"href") {
                    self.raw.push((tags::A, v.to_vec()));
                    self.open_anchor = Some(self.raw.len() - 1);
                    self.anchor_text.clear();
                }
            }
            b"base" => {
                if let Some(v) = attr(&attrs, b"href") {
                    if self.base.is_none() {
                        if let Ok(u) = Url::parse(String::from_utf8_lossy(v).trim()) {
                            self.base = Some(u);
                        }
                    }
                }
            }
            b"form" => push(self, tags::ACTION, b"action"),
            b"area" => push(self, tags::AREA, b"href"),
            b"frame" | b"iframe" => push(self, tags::FRAME, b"src"),
            b"go" => push(self, tags::GO, b"href"),
            b"img" => push(self, tags::IMG, b"src"),
            b"layer" => push(self, tags::LAYER, b"src"),
            b"link" => push(self, tags::LINK, b"href"),
            b"script" => push(self, tags::SCRIPT, b"src"),
            b"object" => push(self, tags::OBJECT, b"data"),
            b"applet" => push(self, tags::OBJECT, b"code"),
            b"embed" => push(self, tags::EMBED, b"src"),
            b"meta" => {
                let name = attr(&attrs, b"name").unwrap_or(b"");
                let equiv = attr(&attrs, b"http-equiv").unwrap_or(b"");
                let content = attr(&attrs, b"content").unwrap_or(b"");
                if name.eq_ignore_ascii_case(b"robots") {
                    self.meta_robots.push(content.to_vec());
                } else if equiv.eq_ignore_ascii_case(b"refresh") {
                    if self.meta_refresh.is_none() {
                        self.meta_refresh = Some(content.to_vec());
                    }
                } else if mask & tags::META != 0 {
                    let c = String::from_utf8_lossy(content);
                    if c.starts_with("http://") || c.starts_with("https://") {
                        self.raw.push((tags::META, content.to_vec()));
                    }
                }
            }
            _ => {}
        }
    }

    fn end_tag(&mut self, name: &[u8]) {
        if name == b"a" {
            if let Some(i) = self.open_anchor.take() {
                let text = collapse(&self.anchor_text);
                self.anchors.push((i, text));
                self.anchor_text.clear();
            }
        }
    }
}

fn collapse(s: &str) -> String {
    let mut out = String::new();
    for w in s.split_whitespace() {
        if out.len() + w.len() + 1 > MAX_ANCHOR {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// The target of a `<meta http-equiv="refresh" content="5; url=...">`.
fn refresh_target(content: &[u8]) -> Option<String> {
    let c = String::from_utf8_lossy(content);
    let (_, rest) = c.split_once([';', ','])?;
    let rest = rest.trim_start();
    let rest = if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case("url") {
        rest[3..].trim_start().strip_prefix('=')?.trim()
    } else {
        rest.trim()
    };
    let rest = rest.trim_matches(|c| c == '\'' || c == '"');
    (!rest.is_empty()).then(|| rest.to_string())
}

/// Resolves `href` against `base`: absolute, fragment removed; `None` for what is not a
/// hierarchical http(s)-like URL (`javascript:`, `mailto:`, data) or does not parse.
pub fn resolve(base: &Url, href: &str) -> Option<Url> {
    let href = href.trim();
    if href.is_empty() || href.starts_with('#') {
        return None;
    }
    let mut u = base.join(href).ok()?;
    if u.cannot_be_a_base() || u.host_str().is_none() {
        return None;
    }
    u.set_fragment(None);
    Some(u)
}

/// Extracts the links of an HTML document fetched from `url`, over the tags `mask` selects.
pub fn extract(body: &[u8], url: &Url, mask: u32) -> Extracted {
    let mut st = State::default();
    {
        let emitter = CallbackEmitter::new(
            |ev: CallbackEvent<'_>, _: Span<()>| -> Option<std::convert::Infallible> {
                match ev {
                    CallbackEvent::OpenStartTag { name } => {
                        st.tag.clear();
                        st.tag.extend(name.iter().map(u8::to_ascii_lowercase));
                        st.want_tag = tag_wanted(&st.tag);
                        st.want_attr = false;
                        st.attrs.clear();
                    }
                    CallbackEvent::AttributeName { name } if st.want_tag => {
                        st.attr.clear();
                        st.attr.extend(name.iter().map(u8::to_ascii_lowercase));
                        st.want_attr = attr_wanted(&st.attr);
                        if st.want_attr {
                            st.attrs.push((st.attr.clone(), Vec::new()));
                        }
                    }
                    CallbackEvent::AttributeValue { value } if st.want_attr => {
                        if let Some(last) = st.attrs.last_mut() {
                            last.1 = value.to_vec();
                        }
                    }
                    CallbackEvent::AttributeName { .. } | CallbackEvent::AttributeValue { .. } => {}
                    CallbackEvent::CloseStartTag { .. } => {
                        if st.want_tag {
                            st.close_tag(mask);
                        }
                        st.want_tag = false;
                        st.want_attr = false;
                    }
                    CallbackEvent::EndTag { name } => {
                        if name.eq_ignore_ascii_case(b"a") {
                            st.end_tag(b"a");
                        }
                    }
                    CallbackEvent::String { value } => {
                        if st.open_anchor.is_some() && st.anchor_text.len() < MAX_ANCHOR * 2 {
                            st.anchor_text.push_str(&String::from_utf8_lossy(value));
                        }
                    }
                    CallbackEvent::Comment { value } => {
                        if mask & tags::COMMENT != 0 {
                            st.comments.push(value.to_vec());
                        }
                    }
                    CallbackEvent::Doctype { .. } | CallbackEvent::Error(_) => {}
                }
                None
            },
        );
        let mut emitter = emitter;
        emitter.naively_switch_states(true);
        for _ in Tokenizer::new_with_emitter(body, emitter).flatten() {}
    }
    if let Some(i) = st.open_anchor.take() {
        let text = collapse(&st.anchor_text);
        st.anchors.push((i, text));
    }
    let base = st.base.clone().unwrap_or_else(|| url.clone());
    let mut out = Extracted::default();
    for c in &st.comments {
        for word in String::from_utf8_lossy(c).split_whitespace() {
            let w = word.trim_matches(|c: char| c == '"' || c == '\'' || c == '<' || c == '>');
            if w.starts_with("http://") || w.starts_with("https://") {
                st.raw.push((tags::COMMENT, w.as_bytes().to_vec()));
            }
        }
    }
    let mut texts: Vec<String> = vec![String::new(); st.raw.len()];
    for (i, t) in st.anchors {
        if let Some(slot) = texts.get_mut(i) {
            *slot = t;
        }
    }
    // Indexes into out.links by the hash of the URL: each URI once, without a second copy of
    // it as a map key.
    let mut seen: hashbrown::HashTable<usize> = hashbrown::HashTable::with_capacity(st.raw.len());
    let hash = |s: &str| xxhash_rust::xxh3::xxh3_64(s.as_bytes());
    for ((tag, raw), text) in st.raw.into_iter().zip(texts) {
        if out.links.len() >= MAX_LINKS {
            break;
        }
        let Some(u) = resolve(&base, &String::from_utf8_lossy(&raw)) else {
            continue;
        };
        let s = String::from(u);
        let h = hash(&s);
        let links = &mut out.links;
        match seen.find(h, |&i| links[i].url == s) {
            // Linked again: keep the first, with the first anchor text there is.
            Some(&i) => {
                let first: &mut Link = &mut links[i];
                if first.text.is_empty() {
                    first.text = text;
                }
            }
            None => {
                seen.insert_unique(h, links.len(), |&i| hash(&links[i].url));
                links.push(Link { url: s, text, tag });
            }
        }
    }
    for content in &st.meta_robots {
        let c = String::from_utf8_lossy(content).to_ascii_lowercase();
        for d in c.split(',').map(str::trim) {
            match d {
                "noindex" => out.noindex = true,
                "nofollow" => out.nofollow = true,
                "none" => {
                    out.noindex = true;
                    out.nofollow = true;
                }
                _ => {}
            }
        }
    }
    if mask & tags::META_REFRESH != 0 {
        if let Some(t) = st.meta_refresh.as_deref().and_then(refresh_target) {
            out.refresh = resolve(&base, &t).map(String::from);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u32 = !tags::COMMENT;

    fn ex(html: &str, mask: u32) -> Extracted {
        extract(
            html.as_bytes(),
            &Url::parse("http://h.example:81/dir/page.html").unwrap(),
            mask,
        )
    }

    #[test]
    fn anchors_resolve_against_the_page_and_keep_their_text() {
        let e = ex(
            r##"<html><body><A HREF="a.html">First <b>link</b></a>
               <a href='/top#frag'>top</a><a href="../up/">up</a>
               <a href="http://other.example/x">x</a><a href="#only">f</a>
               <a href="javascript:void(0)">js</a><a href="mailto:a@b">m</a>
               <a href="a.html">again</a></body></html>"##,
            ALL,
        );
        let urls: Vec<&str> = e.links.iter().map(|l| l.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://h.example:81/dir/a.html",
                "http://h.example:81/top",
                "http://h.example:81/up/",
                "http://other.example/x",
            ]
        );
        assert_eq!(e.links[0].text, "First link");
        let twice = ex(r#"<link href="n.html"><a href="n.html">next</a>"#, ALL);
        assert_eq!(twice.links.len(), 1);
        assert_eq!(twice.links[0].text, "next");
        assert_eq!(e.links[0].tag, tags::A);
        assert!(!e.noindex && !e.nofollow && e.refresh.is_none());
    }

    #[test]
    fn international_host_names_become_punycode() {
        // IDNA (UTS #46) through the url crate: the queue, routing and the request's Host
        // header all see the ASCII form.
        let e = ex(
            r#"<a href="http://Bücher.example/ä?q=ü">b</a><a href="http://xn--bcher-kva.example/">c</a>"#,
            ALL,
        );
        let urls: Vec<&str> = e.links.iter().map(|l| l.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://xn--bcher-kva.example/%C3%A4?q=%C3%BC",
                "http://xn--bcher-kva.example/"
            ]
        );
    }

    #[test]
    fn the_mask_selects_tags() {
        let html = r#"<img src="i.png"><link href="s.css"><script src="j.js"></script>
            <frame src="f.html"><iframe src="if.html"></iframe><area href="m.html">
            <form action="/post"></form><embed src="e.swf"><object data="o.bin"></object>
            <a href="a.html">a</a>"#;
        assert_eq!(ex(html, ALL).links.len(), 10);
        let only_a = ex(html, tags::A);
        assert_eq!(only_a.links.len(), 1);
        let img = ex(html, tags::IMG | tags::FRAME);
        let urls: Vec<&str> = img.links.iter().map(|l| l.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://h.example:81/dir/i.png",
                "http://h.example:81/dir/f.html",
                "http://h.example:81/dir/if.html"
            ]
        );
    }

    #[test]
    fn base_href_meta_robots_and_refresh() {
        let e = ex(
            r#"<head><base href="http://b.example/base/"><meta name="ROBOTS" content="NoIndex, nofollow">
               <meta http-equiv="Refresh" content="0; URL='next.html'"></head><a href="x">x</a>"#,
            ALL,
        );
        assert_eq!(e.links[0].url, "http://b.example/base/x");
        assert!(e.noindex && e.nofollow);
        assert_eq!(
            e.refresh.as_deref(),
            Some("http://b.example/base/next.html")
        );
        let none = ex(r#"<meta name="robots" content="none">"#, ALL);
        assert!(none.noindex && none.nofollow);
        let off = ex(
            r#"<meta http-equiv="refresh" content="0;url=n.html">"#,
            ALL & !tags::META_REFRESH,
        );
        assert_eq!(off.refresh, None);
    }

    #[test]
    fn script_bodies_and_comments_are_not_markup() {
        let html = r#"<script>var s = '<a href="in-script.html">';</script><!-- <a href="c.html"> http://c.example/x -->
            <a href="real.html">r</a>"#;
        let e = ex(html, ALL);
        let urls: Vec<&str> = e.links.iter().map(|l| l.url.as_str()).collect();
        assert_eq!(urls, ["http://h.example:81/dir/real.html"]);
        let with_comments = ex(html, ALL | tags::COMMENT);
        assert!(with_comments
            .links
            .iter()
            .any(|l| l.url == "http://c.example/x" && l.tag == tags::COMMENT));
    }

    #[test]
    fn broken_markup_never_panics() {
        for html in [
            "<a href=",
            "<a href=\"x",
            "<<<>>>",
            "<a href=x>unterminated",
            "\u{0}\u{ffff}<a\u{0}href=y>",
            "<meta http-equiv=refresh content=\"5\">",
            "<base href=\"::::\"><a href=\"q\">",
        ] {
            let _ = ex(html, ALL);
        }
        let e = ex("<a href=x>unterminated", ALL);
        assert_eq!(e.links[0].text, "unterminated");
        let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let _ = extract(
            &bytes,
            &Url::parse("http://h/").unwrap(),
            ALL | tags::COMMENT,
        );
    }
}
