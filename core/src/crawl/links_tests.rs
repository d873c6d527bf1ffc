//! Link extraction: what it finds, and the same as the reference extraction finds.

#[path = "links_reference.rs"]
mod reference;

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

/// Pieces of markup the generated documents are made of: the tags and attributes extraction
/// reads, in any case, names at and around the room of a held name (16 bytes), raw text and
/// RCDATA elements with their end tags right and wrong, comments, references, junk bytes.
const TAGS: &[&str] = &[
    "a",
    "A",
    "plaintext",
    "area",
    "base",
    "form",
    "frame",
    "iframe",
    "IFRAME",
    "go",
    "img",
    "Img",
    "layer",
    "link",
    "script",
    "SCRIPT",
    "object",
    "applet",
    "embed",
    "meta",
    "META",
    "p",
    "div",
    "title",
    "textarea",
    "style",
    "xmp",
    "noembed",
    "noscript",
    "noframe",
    "scriptx",
    "ifram",
    "abcdefghijklmnop",
    "abcdefghijklmnopq",
    "abcdefghijklmno",
    "averyveryverylongtagname",
    "a\0",
    "scr\0ipt",
];
const ATTRS: &[&str] = &[
    "href",
    "HREF",
    "Href",
    "src",
    "SRC",
    "action",
    "data",
    "code",
    "name",
    "http-equiv",
    "HTTP-EQUIV",
    "content",
    "http-equivalent",
    "hrefx",
    "hre",
    "abcdefghijklmnop",
    "abcdefghijklmnopq",
    "alt",
    "rel",
    "x\0",
    "'",
    "<",
];
const VALUES: &[&str] = &[
    "a.html",
    "/top",
    "../up/",
    "./",
    "http://o.example/x",
    "https://o.example/y?q=1#f",
    "#frag",
    "javascript:void(0)",
    "mailto:a@b",
    "x.html?a=1&amp;b=2",
    "i&#46;png",
    "&copy=3",
    "robots",
    "ROBOTS",
    "noindex,nofollow",
    "none",
    "refresh",
    "0; url=n.html",
    "5",
    "http://m.example/",
    "http://Bücher.example/ä",
    "",
    " spaced.html ",
    "a\0b",
    "p.html#top",
    "//proto.example/rel",
    "http://127.77.0.1:8080/s1/p2.html",
];
const TEXT: &[&str] = &[
    "word ",
    "Fish &amp; chips",
    "&copy;",
    "&lt;a href=x&gt;",
    "ünï ",
    "\r\n",
    "\n",
    "\0",
    " <!-- http://c.example/in-comment --> ",
    "<!-->",
    "<!--- -->",
    "<?bogus http://b.example/ ?>",
    "<!DOCTYPE html>",
    "<![CDATA[ <a href=cdata.html> ]]>",
    "</a>",
    "</A>",
    "</script>",
    "</SCRIPT >",
    "</title x=\"y\">",
    "</textarea/>",
    "</style>",
    "</xmp>",
    "</iframe>",
    "</abcdefghijklmnopq>",
    "</abcdefghijklmnop>",
    "<",
    ">",
    "\"",
    "'",
    "/",
    "=",
    " ",
    "\t",
    "&",
    "<!--",
    "-->",
    "<a",
    "</",
    "<!",
    "<script><!--",
    "-->",
    "<meta http-equiv=\"refresh\" content=\"0; url=n.html\">",
    "<META HTTP-EQUIV=Refresh CONTENT='1,URL=r.html'>",
    "<meta name=robots content=\"noindex\">",
    "<meta name=\"ROBOTS\" content=nofollow>",
    "<meta name=description content=\"http://m.example/?a=1&amp;b=2\">",
    "<a href=\"x.html\">anchor <b>text</b></a>",
    "<base href=\"http://b.example/d/\">",
    "<textarea><a href=\"in-textarea.html\"></textarea>",
    "<title><a href=t.html></title>",
    "<style><a href=s.html></style>",
    "<script>var a='<a href=j.html>';</script>",
    "<noscript><a href=ns.html></noscript>",
    "<xmp><a href=x.html></xmp>",
    "<iframe src=f.html><a href=if.html></iframe>",
    "<img src=i.png alt=\"&lt;\">",
];

fn pick<'a>(rng: &mut fastrand::Rng, from: &[&'a str]) -> &'a str {
    from[rng.usize(..from.len())]
}

/// A document of `n` pieces.
fn generated(rng: &mut fastrand::Rng, n: usize) -> String {
    let mut s = String::new();
    for _ in 0..n {
        match rng.u8(..10) {
            0..=4 => {
                s.push('<');
                s.push_str(pick(rng, TAGS));
                for _ in 0..rng.usize(..4) {
                    s.push(if rng.bool() { ' ' } else { '\n' });
                    s.push_str(pick(rng, ATTRS));
                    match rng.u8(..5) {
                        0 => {}
                        1 => {
                            s.push('=');
                            s.push_str(&pick(rng, VALUES).replace([' ', '>', '"', '\''], ""));
                        }
                        2 => s.push_str(&format!("='{}'", pick(rng, VALUES))),
                        _ => s.push_str(&format!(" = \"{}\"", pick(rng, VALUES))),
                    }
                }
                s.push_str(if rng.u8(..8) == 0 { "/>" } else { ">" });
            }
            5 => {
                s.push_str("</");
                s.push_str(pick(rng, TAGS));
                s.push('>');
            }
            _ => s.push_str(pick(rng, TEXT)),
        }
    }
    s
}

fn same(body: &[u8], url: &Url, mask: u32) {
    let got = extract(body, url, mask);
    let want = reference::extract(body, url, mask);
    assert_eq!(
        got,
        want,
        "mask {mask:#x}, document {:?}",
        String::from_utf8_lossy(body)
    );
}

#[test]
fn generated_documents_extract_as_the_reference_does() {
    let url = Url::parse("http://h.example:81/dir/page.html").unwrap();
    let mut rng = fastrand::Rng::with_seed(28);
    for i in 0..6_000 {
        let doc = generated(&mut rng, 1 + i % 60);
        let mask = match i % 4 {
            0 => ALL,
            1 => ALL | tags::COMMENT,
            2 => rng.u32(..),
            _ => tags::A | tags::META_REFRESH,
        };
        same(doc.as_bytes(), &url, mask);
    }
    // Raw bytes, not UTF-8, made of the same pieces and of anything.
    for _ in 0..500 {
        let mut doc = generated(&mut rng, 30).into_bytes();
        for _ in 0..rng.usize(..8) {
            let at = rng.usize(..=doc.len());
            doc.insert(at, rng.u8(..));
        }
        same(&doc, &url, ALL | tags::COMMENT);
    }
}

#[test]
fn the_synthetic_webs_pages_extract_as_the_reference_does() {
    use crate::synthweb::{SyntheticWeb, WebSpec};
    let spec: WebSpec = "3:300".parse().unwrap();
    let web = SyntheticWeb::generate(&spec, std::net::Ipv4Addr::new(127, 77, 0, 1), 8080);
    let mut pages = 0;
    for host in web.hosts() {
        for i in 0..300 {
            let path = format!("/s{}/p{i}.html", i / 20);
            let reply = web.respond(host, &path);
            if reply.status != 200 {
                continue;
            }
            let url = Url::parse(&format!("http://{host}{path}")).unwrap();
            same(&reply.body, &url, ALL);
            pages += 1;
        }
    }
    assert!(pages > 800, "{pages} pages of the web compared");
}

#[test]
fn a_big_document_then_small_ones_leave_nothing_behind() {
    // The thread's state keeps its buffers between documents (and gives back one grown past
    // its keep): what one document leaves must not show in the next.
    let url = Url::parse("http://h.example/").unwrap();
    let mut big = String::from("<base href=\"http://b.example/\"><!-- http://c.example/ -->");
    for i in 0..20_000 {
        big.push_str(&format!(
            "<a href=\"p{i}.html\">text {i}</a><meta name=robots content=none>"
        ));
    }
    big.push_str("<a href=\"open.html\">never closed <script>");
    for doc in [
        big.as_str(),
        "<a href=x>x</a>",
        "",
        "<title>",
        big.as_str(),
        "<p>",
    ] {
        same(doc.as_bytes(), &url, ALL | tags::COMMENT);
    }
}

#[test]
fn names_longer_than_their_room_are_long() {
    let mut n = Name::default();
    n.push(b"abcdefgh");
    n.push(b"ijklmnop");
    assert_eq!(n.get(), Some(&b"abcdefghijklmnop"[..]));
    n.push(b"q");
    assert_eq!(n.get(), None);
    n.push(b"r");
    assert_eq!(n.get(), None);
    n.clear();
    n.push(b"a");
    assert_eq!(n.get(), Some(&b"a"[..]));
}

#[test]
fn anchor_text_collapses_as_the_unicode_reading_does() {
    // Every ASCII byte among words (the white space of split_whitespace among them, and the
    // control characters that are not), non-ASCII white space, invalid UTF-8, and texts past
    // MAX_ANCHOR.
    let mut rng = fastrand::Rng::with_seed(28);
    let pieces: &[&[u8]] = &[
        b"word",
        b"x",
        b"\xc2\xa0",
        "\u{2003}".as_bytes(),
        "\u{85}".as_bytes(),
        b"\xff",
        b"\xe2\x80",
        "é".as_bytes(),
    ];
    for i in 0..20_000 {
        let mut text = Vec::new();
        for _ in 0..rng.usize(..if i % 10 == 0 { 200 } else { 12 }) {
            if rng.u8(..3) == 0 {
                text.extend_from_slice(pieces[rng.usize(..pieces.len())]);
            } else if rng.bool() {
                text.push(rng.u8(..0x80));
            } else {
                text.extend_from_slice(b"abc");
            }
        }
        assert_eq!(
            collapse_bytes(&text),
            collapse(&String::from_utf8_lossy(&text)),
            "{text:?}"
        );
        // Appended to the page's buffer of anchor texts: the text before is kept and the
        // limit counts from where this anchor's begins.
        let mut all = String::from("an earlier anchor's words");
        collapse_bytes_into(&text, &mut all);
        assert_eq!(
            all,
            format!("an earlier anchor's words{}", collapse_bytes(&text)),
            "{text:?}"
        );
    }
}
