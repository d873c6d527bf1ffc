//! Link extraction from HTML over the tag set of MS-FSCMT 2.2.2.3.3, selected by a collection's
//! `link_extraction` mask, with `<base href>`, `<meta name="robots">` and
//! `<meta http-equiv="refresh">`. The tokenizer is html5gum's (WHATWG tokenization over borrowed
//! bytes, into an emitter of ours that keeps only what extraction reads); resolution and
//! normalization are the url crate's.

use html5gum::{Emitter, Tokenizer};
use url::Url;

use super::resolve::FastBase;

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
/// are not kept (most of a page's tags and attributes are of no interest).
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

/// The attributes [`State::close_tag`] reads (of the tags [`tag_wanted`] names), each with its
/// slot in [`State::attrs`].
mod attr {
    pub const HREF: usize = 0;
    pub const SRC: usize = 1;
    pub const ACTION: usize = 2;
    pub const DATA: usize = 3;
    pub const CODE: usize = 4;
    pub const NAME: usize = 5;
    pub const HTTP_EQUIV: usize = 6;
    pub const CONTENT: usize = 7;
    pub const COUNT: usize = 8;

    /// The slot of an attribute name (lower case, as the tokenizer gives it).
    pub fn slot(name: &[u8]) -> Option<usize> {
        Some(match name {
            b"href" => HREF,
            b"src" => SRC,
            b"action" => ACTION,
            b"data" => DATA,
            b"code" => CODE,
            b"name" => NAME,
            b"http-equiv" => HTTP_EQUIV,
            b"content" => CONTENT,
            _ => return None,
        })
    }
}

/// What the open tag is.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum TagKind {
    #[default]
    None,
    Start,
    End,
}

/// The extraction's state, fed by the tokenizer through [`LinkEmitter`]: only what link
/// extraction reads is kept (the name of the open tag, the values of the wanted attributes of
/// the wanted tags, anchor text while an `<a>` is open, comments when they are asked for).
#[derive(Default)]
struct State {
    /// The name of the open tag (lower case: the tokenizer lowers it).
    tag: Vec<u8>,
    kind: TagKind,
    /// The open start tag is one of [`tag_wanted`]'s (once `decided`).
    want_tag: bool,
    /// The open tag's name is whole, and `want_tag` says what it is.
    decided: bool,
    /// The name of the attribute being read, while it is being read (of a wanted tag only).
    attr_name: Vec<u8>,
    /// The attribute's name is being read (its slot not chosen yet).
    name_open: bool,
    /// The slot the attribute being read fills (the first of each name counts).
    cur: Option<usize>,
    /// The value of each wanted attribute of the open tag, as a range of `values`.
    attrs: [Option<(usize, usize)>; attr::COUNT],
    values: Vec<u8>,
    /// The name of the last start tag, for the end tag that closes raw text (WHATWG
    /// "appropriate end tag token").
    last_start_tag: Vec<u8>,
    /// Index into `raw` of the open `<a>` collecting text.
    open_anchor: Option<usize>,
    anchor_text: Vec<u8>,
    base: Option<Url>,
    comment: Vec<u8>,
    comments: Vec<Vec<u8>>,
    raw: Vec<(u32, Vec<u8>)>,
    anchors: Vec<(usize, String)>,
    meta_robots: Vec<Vec<u8>>,
    meta_refresh: Option<Vec<u8>>,
}

impl State {
    /// The open tag's name is whole: is it one whose attributes are read?
    fn decide(&mut self) {
        if !std::mem::take(&mut self.decided) {
            self.want_tag = self.kind == TagKind::Start && tag_wanted(&self.tag);
        }
        self.decided = true;
    }

    fn attr(&self, slot: usize) -> Option<&[u8]> {
        self.attrs[slot].map(|(a, b)| &self.values[a..b])
    }

    /// The name of the attribute being read is whole: its slot, unless the tag already had it.
    fn end_attr_name(&mut self) {
        if std::mem::take(&mut self.name_open) {
            self.cur = attr::slot(&self.attr_name).filter(|&i| self.attrs[i].is_none());
            if let Some(i) = self.cur {
                self.attrs[i] = Some((self.values.len(), self.values.len()));
            }
        }
    }

    /// The attribute being read is whole.
    fn end_attr(&mut self) {
        self.end_attr_name();
        if let Some(i) = self.cur.take() {
            if let Some(r) = &mut self.attrs[i] {
                r.1 = self.values.len();
            }
        }
    }

    fn close_tag(&mut self, mask: u32) {
        let push = |this: &mut State, key: u32, slot: usize| {
            if mask & key != 0 {
                if let Some(v) = this.attr(slot) {
                    let v = v.to_vec();
                    this.raw.push((key, v));
                }
            }
        };
        let tag = std::mem::take(&mut self.tag);
        match tag.as_slice() {
            b"a" if mask & tags::A != 0 => {
                if let Some(v) = self.attr(attr::HREF) {
                    let v = v.to_vec();
                    self.raw.push((tags::A, v));
                    self.open_anchor = Some(self.raw.len() - 1);
                    self.anchor_text.clear();
                }
            }
            b"base" => {
                if let Some(v) = self.attr(attr::HREF) {
                    if self.base.is_none() {
                        if let Ok(u) = Url::parse(String::from_utf8_lossy(v).trim()) {
                            self.base = Some(u);
                        }
                    }
                }
            }
            b"form" => push(self, tags::ACTION, attr::ACTION),
            b"area" => push(self, tags::AREA, attr::HREF),
            b"frame" | b"iframe" => push(self, tags::FRAME, attr::SRC),
            b"go" => push(self, tags::GO, attr::HREF),
            b"img" => push(self, tags::IMG, attr::SRC),
            b"layer" => push(self, tags::LAYER, attr::SRC),
            b"link" => push(self, tags::LINK, attr::HREF),
            b"script" => push(self, tags::SCRIPT, attr::SRC),
            b"object" => push(self, tags::OBJECT, attr::DATA),
            b"applet" => push(self, tags::OBJECT, attr::CODE),
            b"embed" => push(self, tags::EMBED, attr::SRC),
            b"meta" => {
                let name = self.attr(attr::NAME).unwrap_or(b"");
                let equiv = self.attr(attr::HTTP_EQUIV).unwrap_or(b"");
                let content = self.attr(attr::CONTENT).unwrap_or(b"");
                if name.eq_ignore_ascii_case(b"robots") {
                    let c = content.to_vec();
                    self.meta_robots.push(c);
                } else if equiv.eq_ignore_ascii_case(b"refresh") {
                    if self.meta_refresh.is_none() {
                        self.meta_refresh = Some(content.to_vec());
                    }
                } else if mask & tags::META != 0
                    && (content.starts_with(b"http://") || content.starts_with(b"https://"))
                {
                    let c = content.to_vec();
                    self.raw.push((tags::META, c));
                }
            }
            _ => {}
        }
        self.tag = tag;
    }

    fn end_anchor(&mut self) {
        if let Some(i) = self.open_anchor.take() {
            let text = collapse(&String::from_utf8_lossy(&self.anchor_text));
            self.anchors.push((i, text));
            self.anchor_text.clear();
        }
    }
}

/// The tokenizer's emitter (html5gum's `Emitter`, WHATWG tokenization): it feeds [`State`]
/// directly, keeping no token it does not need, and asks for no parse errors (the tokenizer
/// then skips its per-byte character checks).
struct LinkEmitter<'a> {
    st: &'a mut State,
    mask: u32,
}

impl Emitter for LinkEmitter<'_> {
    type Token = std::convert::Infallible;

    fn set_last_start_tag(&mut self, last_start_tag: Option<&[u8]>) {
        self.st.last_start_tag.clear();
        self.st
            .last_start_tag
            .extend_from_slice(last_start_tag.unwrap_or_default());
    }

    fn emit_eof(&mut self) {}

    fn emit_error(&mut self, _: html5gum::Error) {}

    fn should_emit_errors(&mut self) -> bool {
        false
    }

    fn pop_token(&mut self) -> Option<Self::Token> {
        None
    }

    fn emit_string(&mut self, s: &[u8]) {
        let st = &mut *self.st;
        if st.open_anchor.is_some() && st.anchor_text.len() < MAX_ANCHOR * 2 {
            st.anchor_text.extend_from_slice(s);
        }
    }

    fn init_start_tag(&mut self) {
        let st = &mut *self.st;
        st.tag.clear();
        st.kind = TagKind::Start;
        st.want_tag = false;
        st.decided = false;
        st.name_open = false;
        st.cur = None;
        st.attrs = [None; attr::COUNT];
        st.values.clear();
    }

    fn init_end_tag(&mut self) {
        let st = &mut *self.st;
        st.tag.clear();
        st.kind = TagKind::End;
        st.want_tag = false;
        st.decided = false;
        st.name_open = false;
        st.cur = None;
    }

    fn init_comment(&mut self) {
        self.st.comment.clear();
    }

    fn emit_current_tag(&mut self) -> Option<html5gum::State> {
        let st = &mut *self.st;
        match std::mem::take(&mut st.kind) {
            TagKind::Start => {
                st.decide();
                if st.want_tag {
                    st.end_attr();
                    st.close_tag(self.mask);
                }
                st.last_start_tag.clear();
                st.last_start_tag.extend_from_slice(&st.tag);
                html5gum::naive_next_state(&st.last_start_tag)
            }
            TagKind::End => {
                if st.tag == b"a" {
                    st.end_anchor();
                }
                st.last_start_tag.clear();
                None
            }
            TagKind::None => None,
        }
    }

    fn emit_current_comment(&mut self) {
        if self.mask & tags::COMMENT != 0 {
            let c = self.st.comment.clone();
            self.st.comments.push(c);
        }
    }

    fn emit_current_doctype(&mut self) {}

    fn set_self_closing(&mut self) {}

    fn set_force_quirks(&mut self) {}

    fn push_tag_name(&mut self, s: &[u8]) {
        self.st.tag.extend_from_slice(s);
    }

    fn push_comment(&mut self, s: &[u8]) {
        if self.mask & tags::COMMENT != 0 {
            self.st.comment.extend_from_slice(s);
        }
    }

    fn push_doctype_name(&mut self, _: &[u8]) {}

    fn init_doctype(&mut self) {}

    fn init_attribute(&mut self) {
        let st = &mut *self.st;
        if st.kind != TagKind::Start {
            return;
        }
        st.decide();
        if st.want_tag {
            st.end_attr();
            st.attr_name.clear();
            st.name_open = true;
        }
    }

    fn init_attribute_value(&mut self) {
        if self.st.want_tag {
            self.st.end_attr_name();
        }
    }

    fn push_attribute_name(&mut self, s: &[u8]) {
        if self.st.name_open {
            self.st.attr_name.extend_from_slice(s);
        }
    }

    fn push_attribute_value(&mut self, s: &[u8]) {
        let st = &mut *self.st;
        if st.want_tag {
            st.end_attr_name();
            if st.cur.is_some() {
                st.values.extend_from_slice(s);
            }
        }
    }

    fn set_doctype_public_identifier(&mut self, _: &[u8]) {}

    fn set_doctype_system_identifier(&mut self, _: &[u8]) {}

    fn push_doctype_public_identifier(&mut self, _: &[u8]) {}

    fn push_doctype_system_identifier(&mut self, _: &[u8]) {}

    fn current_is_appropriate_end_tag_token(&mut self) -> bool {
        let st = &*self.st;
        st.kind == TagKind::End && !st.last_start_tag.is_empty() && st.last_start_tag == st.tag
    }
}

fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_ANCHOR));
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
    let emitter = LinkEmitter { st: &mut st, mask };
    // The reader's error type is Infallible: reading a byte slice cannot fail.
    let _ = Tokenizer::new_with_emitter(body, emitter).finish();
    st.end_anchor();
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
    // Hrefs of the common forms are resolved without a URL parse (the url crate's result).
    let fast = FastBase::new(&base);
    let mut seen: hashbrown::HashTable<usize> = hashbrown::HashTable::with_capacity(st.raw.len());
    let hash = |s: &str| xxhash_rust::xxh3::xxh3_64(s.as_bytes());
    for ((tag, raw), text) in st.raw.into_iter().zip(texts) {
        if out.links.len() >= MAX_LINKS {
            break;
        }
        let href = String::from_utf8_lossy(&raw);
        let resolved = match fast.as_ref().and_then(|f| f.resolve(&href)) {
            Some(s) => Some(s),
            None => resolve(&base, &href).map(String::from),
        };
        let Some(s) = resolved else {
            continue;
        };
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
    fn attributes_and_text_as_the_tokenizer_reads_them() {
        // Character references in attribute values and anchor text are decoded (WHATWG
        // tokenization: "&amp;" and the legacy "&copy" without a semicolon in text, but not
        // "&copy=" inside an attribute value); the first of two same-named attributes counts;
        // names are matched in any case; attributes of end tags and of other tags are ignored.
        let e = ex(
            r#"<p href="no.html"><A Href="a.html?x=1&amp;y=2&copy=3" HREF="second.html">Fish &amp; chips&copy;</A href="end.html">
               <img alt="x" SRC = 'i&#46;png' src="j.png"/><a href>empty</a>
               <textarea><a href="in-textarea.html"></textarea><title><a href="in-title.html"></title>
               <style>a { } <a href="in-style.html"></style><a href=bare.html title=t>bare</a>"#,
            ALL,
        );
        let got: Vec<(&str, &str, u32)> = e
            .links
            .iter()
            .map(|l| (l.url.as_str(), l.text.as_str(), l.tag))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "http://h.example:81/dir/a.html?x=1&y=2&copy=3",
                    "Fish & chips\u{a9}",
                    tags::A
                ),
                ("http://h.example:81/dir/i.png", "", tags::IMG),
                ("http://h.example:81/dir/bare.html", "bare", tags::A),
            ]
        );
        // A meta tag's content, and a refresh and robots directive written with references.
        let m = ex(
            r#"<meta name="description" content="http://m.example/?a=1&amp;b=2"><meta http-equiv="refresh" content="0;url=n.html?a&amp;b"><meta name="robots" content="noindex&#44;nofollow">"#,
            ALL,
        );
        assert_eq!(m.links.len(), 1);
        assert_eq!(m.links[0].url, "http://m.example/?a=1&b=2");
        assert_eq!(m.links[0].tag, tags::META);
        assert_eq!(
            m.refresh.as_deref(),
            Some("http://h.example:81/dir/n.html?a&b")
        );
        assert!(m.noindex && m.nofollow);
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
