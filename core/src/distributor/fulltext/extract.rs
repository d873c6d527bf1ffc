//! The text a fed document is searched by: its title and visible text. HTML goes through
//! html5gum's tokenizer (WHATWG tokenization over borrowed bytes, character references decoded):
//! the text between tags, without what is not shown (`<script>`, `<style>`, `<template>`,
//! `<noscript>`, comments), the `<title>` apart. Plain text is taken as it is. Everything else
//! (images, archives) gives no text: it is found by its URI only.

use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
use html5gum::{Span, Tokenizer};

/// Most bytes of text kept from one document; the rest is not indexed.
pub const MAX_TEXT: usize = 1 << 20;
/// Most bytes of a title kept.
pub const MAX_TITLE: usize = 1024;

/// What a document is searched by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Text {
    /// The `<title>` of an HTML document, white space collapsed; empty otherwise.
    pub title: String,
    /// The visible text, white space collapsed.
    pub body: String,
}

/// How a body is read, from its Content-Type (or, without one, from its first bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `text/html`, `application/xhtml+xml`.
    Html,
    /// Any other `text/*`, and JSON or XML.
    Plain,
    /// Not text.
    Binary,
}

/// The kind of a body with the Content-Type `content_type` (None: not given, sniffed).
pub fn kind(content_type: Option<&[u8]>, body: &[u8]) -> Kind {
    let Some(ct) = content_type else {
        let head = &body[..body.len().min(512)];
        let lower = String::from_utf8_lossy(head).to_ascii_lowercase();
        let start = lower.trim_start();
        return if start.starts_with("<!doctype html") || lower.contains("<html") {
            Kind::Html
        } else if match std::str::from_utf8(head) {
            Ok(_) => true,
            // A character cut by the 512 bytes is still text.
            Err(e) => e.error_len().is_none(),
        } {
            Kind::Plain
        } else {
            Kind::Binary
        };
    };
    let ct = String::from_utf8_lossy(ct).to_ascii_lowercase();
    let mime = ct.split(';').next().unwrap_or("").trim();
    match mime {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        m if m.starts_with("text/") || m.ends_with("json") || m.ends_with("xml") => Kind::Plain,
        _ => Kind::Binary,
    }
}

/// The title and text of a body of the given Content-Type.
pub fn text(content_type: Option<&[u8]>, body: &[u8]) -> Text {
    match kind(content_type, body) {
        Kind::Html => html(body),
        Kind::Plain => Text {
            title: String::new(),
            body: collapse(
                &String::from_utf8_lossy(&body[..body.len().min(MAX_TEXT)]),
                MAX_TEXT,
            ),
        },
        Kind::Binary => Text::default(),
    }
}

/// White space collapsed to single spaces, at most `max` bytes (cut at a word).
fn collapse(s: &str, max: usize) -> String {
    let mut out = String::new();
    for w in s.split_whitespace() {
        if out.len() + w.len() + 1 > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Elements whose content is not shown.
fn hidden(tag: &[u8]) -> bool {
    matches!(
        tag,
        b"script" | b"style" | b"template" | b"noscript" | b"svg"
    )
}

/// Elements that do not break a word: the text on both sides runs on.
fn inline(tag: &[u8]) -> bool {
    matches!(
        tag,
        b"a" | b"abbr"
            | b"b"
            | b"bdi"
            | b"bdo"
            | b"cite"
            | b"code"
            | b"data"
            | b"dfn"
            | b"em"
            | b"i"
            | b"kbd"
            | b"mark"
            | b"q"
            | b"s"
            | b"samp"
            | b"small"
            | b"span"
            | b"strong"
            | b"sub"
            | b"sup"
            | b"time"
            | b"u"
            | b"var"
    )
}

#[derive(Default)]
struct State {
    tag: Vec<u8>,
    /// The hidden element we are in.
    skip: Option<Vec<u8>>,
    in_title: bool,
    title: String,
    body: String,
}

impl State {
    fn push(&mut self, s: &str) {
        if self.in_title {
            if self.title.len() < MAX_TITLE * 2 {
                self.title.push_str(s);
            }
        } else if self.skip.is_none() && self.body.len() < MAX_TEXT + 64 {
            self.body.push_str(s);
        }
    }

    fn start(&mut self) {
        let tag = std::mem::take(&mut self.tag);
        if tag == b"title" {
            self.in_title = true;
        } else if self.skip.is_none() && hidden(&tag) {
            self.skip = Some(tag.clone());
        }
        if !inline(&tag) {
            self.push(" ");
        }
        self.tag = tag;
    }

    fn end(&mut self, tag: &[u8]) {
        if tag == b"title" {
            self.in_title = false;
            self.title.push(' ');
        } else if self.skip.as_deref() == Some(tag) {
            self.skip = None;
        }
        if !inline(tag) {
            self.push(" ");
        }
    }
}

/// The title and visible text of an HTML document.
pub fn html(body: &[u8]) -> Text {
    let mut st = State::default();
    {
        let mut emitter = CallbackEmitter::new(
            |ev: CallbackEvent<'_>, _: Span<()>| -> Option<std::convert::Infallible> {
                match ev {
                    CallbackEvent::OpenStartTag { name } => {
                        st.tag.clear();
                        st.tag.extend(name.iter().map(u8::to_ascii_lowercase));
                    }
                    CallbackEvent::CloseStartTag { self_closing } => {
                        st.start();
                        if self_closing {
                            let tag = st.tag.clone();
                            st.end(&tag);
                        }
                    }
                    CallbackEvent::EndTag { name } => {
                        let lower: Vec<u8> = name.iter().map(u8::to_ascii_lowercase).collect();
                        st.end(&lower);
                    }
                    CallbackEvent::String { value } => st.push(&String::from_utf8_lossy(value)),
                    CallbackEvent::AttributeName { .. }
                    | CallbackEvent::AttributeValue { .. }
                    | CallbackEvent::Comment { .. }
                    | CallbackEvent::Doctype { .. }
                    | CallbackEvent::Error(_) => {}
                }
                None
            },
        );
        // Script and style content is raw text, not markup (WHATWG 13.2.5.2-13.2.5.3).
        emitter.naively_switch_states(true);
        for _ in Tokenizer::new_with_emitter(body, emitter).flatten() {}
    }
    Text {
        title: collapse(&st.title, MAX_TITLE),
        body: collapse(&st.body, MAX_TEXT),
    }
}
