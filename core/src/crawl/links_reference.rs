//! The link extraction as it was before its emitter held names in place and its state was
//! kept between documents: the reference the equivalence tests of `links_tests.rs` hold
//! [`super::super::extract`] to.

use html5gum::{Emitter, Tokenizer};
use url::Url;

use super::super::{attr, collapse, refresh_target, resolve, tag_wanted, tags, Extracted, Link};
use super::super::{MAX_ANCHOR, MAX_LINKS};
use crate::crawl::resolve::FastBase;

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

/// The extraction as it was before the state was kept per thread and names were held in place.
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
