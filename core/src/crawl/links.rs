//! Link extraction from HTML over the tag set of MS-FSCMT 2.2.2.3.3, selected by a collection's
//! `link_extraction` mask, with `<base href>`, `<meta name="robots">` and
//! `<meta http-equiv="refresh">`. The tokenizer is html5gum's (WHATWG tokenization over borrowed
//! bytes, into an emitter of ours that keeps only what extraction reads); resolution and
//! normalization are the url crate's.

use std::borrow::Cow;
use std::cell::RefCell;

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

/// Room of a [`Name`]: more than the longest name extraction compares (`http-equiv`, and
/// `plaintext` among the tags that switch the tokenizer to raw text).
const NAME_ROOM: usize = 16;

/// A tag or attribute name as the tokenizer gives it (lower case), held in place: a name
/// longer than [`NAME_ROOM`] is only marked long, since no name extraction compares is that
/// long (the tags of [`tag_wanted`], the attributes of [`attr::slot`], the raw text tags of
/// html5gum's `naive_next_state`).
#[derive(Clone, Copy, Default)]
struct Name {
    buf: [u8; NAME_ROOM],
    len: u8,
    long: bool,
}

impl Name {
    fn clear(&mut self) {
        self.len = 0;
        self.long = false;
    }

    fn push(&mut self, s: &[u8]) {
        if self.long {
            return;
        }
        let at = usize::from(self.len);
        match self.buf.get_mut(at..at + s.len()) {
            Some(room) => {
                room.copy_from_slice(s);
                // At most NAME_ROOM: the slice fitted.
                self.len += s.len() as u8;
            }
            None => self.long = true,
        }
    }

    /// The name; `None` for a long one, which equals none of the names compared.
    fn get(&self) -> Option<&[u8]> {
        (!self.long).then(|| &self.buf[..usize::from(self.len)])
    }
}

/// The extraction's state, fed by the tokenizer through [`LinkEmitter`]: only what link
/// extraction reads is kept (the name of the open tag, the values of the wanted attributes of
/// the wanted tags, anchor text while an `<a>` is open, comments when they are asked for).
/// One is kept per thread and cleared between documents ([`State::clear`]), so a page's
/// extraction allocates nothing once the buffers have grown.
#[derive(Default)]
struct State {
    /// The name of the open tag (lower case: the tokenizer lowers it).
    tag: Name,
    kind: TagKind,
    /// The open start tag is one of [`tag_wanted`]'s (once `decided`).
    want_tag: bool,
    /// The open tag's name is whole, and `want_tag` says what it is.
    decided: bool,
    /// The name of the attribute being read, while it is being read (of a wanted tag only).
    attr_name: Name,
    /// The attribute's name is being read (its slot not chosen yet).
    name_open: bool,
    /// The slot the attribute being read fills (the first of each name counts).
    cur: Option<usize>,
    /// The value of each wanted attribute of the open tag, as a range of `values`.
    attrs: [Option<(usize, usize)>; attr::COUNT],
    values: Vec<u8>,
    /// The name of the last start tag, for the end tag that closes raw text (WHATWG
    /// "appropriate end tag token"); `None` when there is none.
    last_start_tag: Option<Name>,
    /// Index into `raw` of the open `<a>` collecting text.
    open_anchor: Option<usize>,
    anchor_text: Vec<u8>,
    base: Option<Url>,
    comment: Vec<u8>,
    /// Each comment's text, as a range of `comment_text` (when comments are asked for).
    comments: Vec<(usize, usize)>,
    comment_text: Vec<u8>,
    /// The links found, in document order: their key and their text as a range of `hrefs`.
    raw: Vec<(u32, usize, usize)>,
    hrefs: Vec<u8>,
    /// Each `<a>`'s text: its link's index in `raw` and its collapsed text as a range of
    /// `anchor_text_all` (one buffer for the page's anchors, not a `String` each).
    anchors: Vec<(usize, usize, usize)>,
    anchor_text_all: String,
    /// Per link of `raw`, its anchor text as a range of `anchor_text_all` (empty for none).
    link_texts: Vec<(usize, usize)>,
    /// The href being resolved: a link seen before on the page is found without a copy.
    url_buf: String,
    /// Indexes into the extraction's links by the hash of the URL.
    seen: hashbrown::HashTable<usize>,
    meta_robots: Vec<Vec<u8>>,
    meta_refresh: Option<Vec<u8>>,
}

/// The largest buffer a thread's [`State`] keeps between documents; one grown larger by a big
/// document is given back.
const KEEP_BUFFER: usize = 64 << 10;

impl State {
    /// Ready for the next document: everything emptied, the buffers' room kept (up to
    /// [`KEEP_BUFFER`] each).
    fn clear(&mut self) {
        fn empty<T>(v: &mut Vec<T>) {
            v.clear();
            if v.capacity() * std::mem::size_of::<T>() > KEEP_BUFFER {
                *v = Vec::new();
            }
        }
        self.tag.clear();
        self.kind = TagKind::None;
        self.want_tag = false;
        self.decided = false;
        self.attr_name.clear();
        self.name_open = false;
        self.cur = None;
        self.attrs = [None; attr::COUNT];
        empty(&mut self.values);
        self.last_start_tag = None;
        self.open_anchor = None;
        empty(&mut self.anchor_text);
        self.base = None;
        empty(&mut self.comment);
        empty(&mut self.comments);
        empty(&mut self.comment_text);
        empty(&mut self.raw);
        empty(&mut self.hrefs);
        empty(&mut self.anchors);
        self.anchor_text_all.clear();
        if self.anchor_text_all.capacity() > KEEP_BUFFER {
            self.anchor_text_all = String::new();
        }
        empty(&mut self.link_texts);
        self.url_buf.clear();
        self.seen.clear();
        if self.seen.capacity() * std::mem::size_of::<usize>() > KEEP_BUFFER {
            self.seen = hashbrown::HashTable::new();
        }
        empty(&mut self.meta_robots);
        self.meta_refresh = None;
    }

    /// The open tag's name is whole: is it one whose attributes are read?
    fn decide(&mut self) {
        if !std::mem::take(&mut self.decided) {
            self.want_tag = self.kind == TagKind::Start && self.tag.get().is_some_and(tag_wanted);
        }
        self.decided = true;
    }

    fn attr(&self, slot: usize) -> Option<&[u8]> {
        self.attrs[slot].map(|(a, b)| &self.values[a..b])
    }

    /// The name of the attribute being read is whole: its slot, unless the tag already had it.
    fn end_attr_name(&mut self) {
        if std::mem::take(&mut self.name_open) {
            self.cur = self
                .attr_name
                .get()
                .and_then(attr::slot)
                .filter(|&i| self.attrs[i].is_none());
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

    /// A link with key `key` to the value of attribute `slot`, if the open tag has it.
    fn push_link(&mut self, key: u32, slot: usize) -> bool {
        match self.attrs[slot] {
            Some((a, b)) => {
                let at = self.hrefs.len();
                self.hrefs.extend_from_slice(&self.values[a..b]);
                self.raw.push((key, at, self.hrefs.len()));
                true
            }
            None => false,
        }
    }

    /// An `<a>` with an href: its link, and its text collected from here.
    fn open_anchor(&mut self) {
        if self.push_link(tags::A, attr::HREF) {
            self.open_anchor = Some(self.raw.len() - 1);
            self.anchor_text.clear();
        }
    }

    fn close_tag(&mut self, mask: u32) {
        let push = |this: &mut State, key: u32, slot: usize| {
            if mask & key != 0 {
                this.push_link(key, slot);
            }
        };
        let tag = self.tag;
        match tag.get().unwrap_or_default() {
            b"a" if mask & tags::A != 0 => self.open_anchor(),
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
                    self.push_link(tags::META, attr::CONTENT);
                }
            }
            _ => {}
        }
    }

    fn end_anchor(&mut self) {
        if let Some(i) = self.open_anchor.take() {
            let at = self.anchor_text_all.len();
            collapse_bytes_into(&self.anchor_text, &mut self.anchor_text_all);
            self.anchors.push((i, at, self.anchor_text_all.len()));
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
        self.st.last_start_tag = last_start_tag.map(|s| {
            let mut n = Name::default();
            n.push(s);
            n
        });
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
                st.last_start_tag = Some(st.tag);
                // A long name is none of the raw text tags.
                html5gum::naive_next_state(st.tag.get().unwrap_or_default())
            }
            TagKind::End => {
                if st.tag.get() == Some(b"a") {
                    st.end_anchor();
                }
                st.last_start_tag = None;
                None
            }
            TagKind::None => None,
        }
    }

    fn emit_current_comment(&mut self) {
        if self.mask & tags::COMMENT != 0 {
            let st = &mut *self.st;
            let at = st.comment_text.len();
            st.comment_text.extend_from_slice(&st.comment);
            st.comments.push((at, st.comment_text.len()));
        }
    }

    fn emit_current_doctype(&mut self) {}

    fn set_self_closing(&mut self) {}

    fn set_force_quirks(&mut self) {}

    fn push_tag_name(&mut self, s: &[u8]) {
        self.st.tag.push(s);
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
            self.st.attr_name.push(s);
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
        st.kind == TagKind::End
            && st
                .last_start_tag
                .as_ref()
                .and_then(Name::get)
                .is_some_and(|last| !last.is_empty() && st.tag.get() == Some(last))
    }
}

/// [`collapse`] of the text's lossy UTF-8 reading; ASCII text (most anchors) is split at its
/// white space bytes directly, which are the ASCII characters `split_whitespace` splits at.
#[cfg(test)]
fn collapse_bytes(text: &[u8]) -> String {
    let mut out = String::new();
    collapse_bytes_into(text, &mut out);
    out
}

/// [`collapse_bytes`] appended to `out` (the page's buffer of anchor texts).
fn collapse_bytes_into(text: &[u8], out: &mut String) {
    let s = match std::str::from_utf8(text) {
        Ok(s) if s.is_ascii() => s,
        _ => return collapse_into(&String::from_utf8_lossy(text), out),
    };
    let space = |b: u8| matches!(b, b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r' | b' ');
    let bytes = s.as_bytes();
    let start = out.len();
    out.reserve(s.len().min(MAX_ANCHOR));
    let mut i = 0;
    loop {
        while i < bytes.len() && space(bytes[i]) {
            i += 1;
        }
        let word = i;
        while i < bytes.len() && !space(bytes[i]) {
            i += 1;
        }
        if word == i {
            break;
        }
        // ASCII: every index is a character boundary.
        if !push_word(out, start, &s[word..i]) {
            break;
        }
    }
}

/// The words of `s`, one space between them, as many whole words as fit in [`MAX_ANCHOR`]
/// bytes.
#[cfg(test)]
fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_ANCHOR));
    collapse_into(s, &mut out);
    out
}

/// [`collapse`] appended to `out`.
fn collapse_into(s: &str, out: &mut String) {
    let start = out.len();
    for w in s.split_whitespace() {
        if !push_word(out, start, w) {
            break;
        }
    }
}

/// Appends word `w` to the anchor text that begins at `start` in `out`, after a space unless
/// it is the first; false, leaving `out` as it was, when the text would not fit in
/// [`MAX_ANCHOR`] bytes.
#[inline]
fn push_word(out: &mut String, start: usize, w: &str) -> bool {
    if out.len() - start + w.len() + 1 > MAX_ANCHOR {
        return false;
    }
    if out.len() > start {
        out.push(' ');
    }
    out.push_str(w);
    true
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

thread_local! {
    /// Each thread's extraction state, kept between documents for its buffers' room.
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Extracts the links of an HTML document fetched from `url`, over the tags `mask` selects.
pub fn extract(body: &[u8], url: &Url, mask: u32) -> Extracted {
    STATE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut st) => {
            st.clear();
            extract_with(&mut st, body, url, mask)
        }
        // Not reached (extraction does not call itself); a fresh state does the same work.
        Err(_) => extract_with(&mut State::default(), body, url, mask),
    })
}

fn extract_with(st: &mut State, body: &[u8], url: &Url, mask: u32) -> Extracted {
    let emitter = LinkEmitter { st, mask };
    // The reader's error type is Infallible: reading a byte slice cannot fail.
    let _ = Tokenizer::new_with_emitter(body, emitter).finish();
    st.end_anchor();
    let State {
        base,
        comments,
        comment_text,
        raw,
        hrefs,
        anchors,
        anchor_text_all,
        link_texts,
        url_buf,
        seen,
        meta_robots,
        meta_refresh,
        ..
    } = &mut *st;
    let base = base.as_ref().unwrap_or(url);
    let mut out = Extracted::default();
    for &(a, b) in comments.iter() {
        for word in String::from_utf8_lossy(&comment_text[a..b]).split_whitespace() {
            let w = word.trim_matches(|c: char| c == '"' || c == '\'' || c == '<' || c == '>');
            if w.starts_with("http://") || w.starts_with("https://") {
                let at = hrefs.len();
                hrefs.extend_from_slice(w.as_bytes());
                raw.push((tags::COMMENT, at, hrefs.len()));
            }
        }
    }
    link_texts.clear();
    link_texts.resize(raw.len(), (0, 0));
    for &(i, a, b) in anchors.iter() {
        if let Some(slot) = link_texts.get_mut(i) {
            *slot = (a, b);
        }
    }
    // Indexes into out.links by the hash of the URL: each URI once, without a second copy of
    // it as a map key. Each href is resolved into `url_buf`: only a URL not seen before on the
    // page is copied out (a `String` of its own size), as is its anchor text.
    // Hrefs of the common forms are resolved without a URL parse (the url crate's result).
    let fast = FastBase::new(base);
    out.links.reserve(raw.len().min(MAX_LINKS));
    let hash = |s: &str| xxhash_rust::xxh3::xxh3_64(s.as_bytes());
    // Empty (cleared with the state): nothing to hash again as it grows.
    seen.reserve(raw.len(), |&i| hash(&out.links[i].url));
    for (&(tag, a, b), &(ta, tb)) in raw.iter().zip(link_texts.iter()) {
        if out.links.len() >= MAX_LINKS {
            break;
        }
        // `str::from_utf8` first: its ASCII fast path, where the lossy conversion walks the
        // bytes chunk by chunk even when they are valid.
        let href = match std::str::from_utf8(&hrefs[a..b]) {
            Ok(h) => Cow::Borrowed(h),
            Err(_) => String::from_utf8_lossy(&hrefs[a..b]),
        };
        let s: Cow<'_, str> = if fast
            .as_ref()
            .is_some_and(|f| f.resolve_into(&href, url_buf))
        {
            Cow::Borrowed(url_buf.as_str())
        } else {
            match resolve(base, &href) {
                Some(u) => Cow::Owned(String::from(u)),
                None => continue,
            }
        };
        let text = &anchor_text_all[ta..tb];
        let h = hash(&s);
        let links = &mut out.links;
        match seen.find(h, |&i| links[i].url == *s) {
            // Linked again: keep the first, with the first anchor text there is.
            Some(&i) => {
                let first: &mut Link = &mut links[i];
                if first.text.is_empty() {
                    first.text = text.to_owned();
                }
            }
            None => {
                seen.insert_unique(h, links.len(), |&i| hash(&links[i].url));
                links.push(Link {
                    url: s.into_owned(),
                    text: text.to_owned(),
                    tag,
                });
            }
        }
    }
    for content in meta_robots.iter() {
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
        if let Some(t) = meta_refresh.as_deref().and_then(refresh_target) {
            out.refresh = resolve(base, &t).map(String::from);
        }
    }
    out
}

#[cfg(test)]
#[path = "links_tests.rs"]
mod tests;
