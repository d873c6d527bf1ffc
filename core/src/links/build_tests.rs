//! The batch builders against a plain model of the lines (MS-FSWASDR 2.2.1.3.1): the CIDHASH
//! written from the alphabet table against the base64 crate's encoding cut to 21 characters,
//! and every field of a batch built from generated documents against the same lines written
//! the straightforward way (one hash per URL use, `write!` for the timestamp, the anchor mapped
//! byte by byte, a set of the URLs mapped), byte for byte.

use std::collections::HashSet;
use std::io::Write;

use base64::Engine;
use md5::{Digest, Md5};

use super::*;

/// CIDHASH as 2.2.1.3.1.1 words it: the base64 of the MD5, cut to 21 characters.
fn model_cidhash(url: &[u8]) -> [u8; CIDHASH_LEN] {
    let text = base64::engine::general_purpose::STANDARD.encode(Md5::digest(url));
    text.as_bytes()[..CIDHASH_LEN].try_into().unwrap()
}

#[test]
fn cidhash_is_the_base64_of_the_md5_cut_to_21() {
    let mut rng = fastrand::Rng::with_seed(28);
    for len in 0..300 {
        for _ in 0..20 {
            let url: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            assert_eq!(cidhash(&url).as_bytes(), &model_cidhash(&url), "{url:?}");
        }
    }
}

#[test]
fn cidhashes_of_a_batch_are_each_urls_own() {
    // Batches of 1 to 70 URLs (part-filled and several groups of the MD5 lanes, over the
    // 32 a call takes at a time), lengths mixed.
    let mut rng = fastrand::Rng::with_seed(2828);
    for n in 1..=70 {
        let urls: Vec<Vec<u8>> = (0..n)
            .map(|_| (0..rng.usize(0..200)).map(|_| rng.u8(..)).collect())
            .collect();
        let refs: Vec<&[u8]> = urls.iter().map(Vec::as_slice).collect();
        let mut out = vec![CidHash([0; CIDHASH_LEN]); n];
        cidhash_many(&refs, &mut out);
        for (u, h) in refs.iter().zip(&out) {
            assert_eq!(h.as_bytes(), &model_cidhash(u), "{u:?} in a batch of {n}");
        }
    }
}

/// The fields of a WebAnalyzer batch written the straightforward way.
#[derive(Default)]
struct Model {
    links: Vec<u8>,
    urieq: Vec<u8>,
    eqrepr: Vec<u8>,
    no_links: Vec<u8>,
    urimap: Vec<u8>,
    sitemap: Vec<u8>,
    mapped: HashSet<Vec<u8>>,
    lines: usize,
}

fn ok(url: &[u8]) -> bool {
    !url.is_empty() && !url.iter().any(|&c| matches!(c, b' ' | b'\n' | b'\r' | 0))
}

impl Model {
    fn map(&mut self, url: &[u8]) {
        if self.mapped.insert(url.to_vec()) {
            self.urimap.extend_from_slice(url);
            self.urimap.push(b' ');
            self.urimap.extend_from_slice(&model_cidhash(url));
            self.urimap.push(b'\n');
            self.lines += 1;
        }
    }

    fn link(&mut self, from: &[u8], to: &[u8], intra: bool, ts: u64, anchor: &[u8]) -> bool {
        if !ok(from) || !ok(to) {
            return false;
        }
        let out = &mut self.links;
        out.extend_from_slice(&model_cidhash(from));
        out.push(b' ');
        out.extend_from_slice(&model_cidhash(to));
        write!(out, " {} {ts} ", u8::from(intra)).unwrap();
        out.extend(anchor.iter().map(|&c| match c {
            b'\n' | b'\r' => b' ',
            c => c,
        }));
        out.push(b'\n');
        self.lines += 1;
        self.map(from);
        self.map(to);
        true
    }

    fn equivalence(&mut self, doc: &[u8], class: &[&[u8]], ts: u64) -> bool {
        if !ok(doc) || !class.iter().all(|m| ok(m)) {
            return false;
        }
        for m in class {
            self.urieq.extend_from_slice(&model_cidhash(doc));
            self.urieq.push(b' ');
            self.urieq.extend_from_slice(&model_cidhash(m));
            writeln!(self.urieq, " {ts}").unwrap();
            self.lines += 1;
        }
        self.eqrepr.extend_from_slice(&model_cidhash(doc));
        self.eqrepr.push(b' ');
        self.eqrepr.extend_from_slice(doc);
        write!(self.eqrepr, " {ts} ").unwrap();
        self.eqrepr.extend_from_slice(&class.join(&0u8));
        self.eqrepr.push(b'\n');
        self.lines += 1;
        self.map(doc);
        for m in class {
            self.map(m);
        }
        true
    }

    fn no_links(&mut self, doc: &[u8], ts: u64) {
        self.no_links.extend_from_slice(doc);
        self.no_links.push(b' ');
        self.no_links.extend_from_slice(&model_cidhash(doc));
        writeln!(self.no_links, " {ts}").unwrap();
        self.lines += 1;
        self.map(doc);
    }

    fn sitemap(&mut self, doc: &[u8], site: &[u8]) -> bool {
        if !ok(doc) || !ok(site) {
            return false;
        }
        self.sitemap.extend_from_slice(&model_cidhash(doc));
        self.sitemap.push(b' ');
        self.sitemap.extend_from_slice(site);
        self.sitemap.push(b'\n');
        self.lines += 1;
        true
    }
}

/// A URL from a small pool (so that documents and links repeat), now and then with a
/// separator in it or empty.
fn url(rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut u = format!("http://h{}.example/p/{}.html", rng.u8(..4), rng.u16(..40)).into_bytes();
    match rng.u8(..60) {
        0 => u.clear(),
        1 => u.insert(9, b' '),
        2 => u.push(b'\n'),
        3 => u.insert(12, b'\r'),
        4 => u.push(0),
        5 => u.extend_from_slice("/\u{e9}t\u{e9}?q=%20".as_bytes()),
        _ => {}
    }
    u
}

fn anchor(rng: &mut fastrand::Rng) -> Vec<u8> {
    let alphabet = b"ab \n\r\t\x00\xc3\xa9<>&";
    (0..rng.usize(..30))
        .map(|_| alphabet[rng.usize(..alphabet.len())])
        .collect()
}

#[test]
fn batches_of_generated_documents_equal_the_plain_lines() {
    let mut rng = fastrand::Rng::with_seed(0x28_0001);
    for round in 0..200 {
        let (mut b, mut m) = (WebAnalyzerBatch::default(), Model::default());
        for _ in 0..rng.usize(1..30) {
            let ts = match rng.u8(..4) {
                0 => 0,
                1 => u64::MAX,
                _ => 1_700_000_000 + rng.u64(..1000),
            };
            let from = url(&mut rng);
            // What the link client does for a page: its urimap line, its links (each skipped
            // when refused), no_links when none was written, its sitemap line.
            let page_ok = b.urimap(&from).is_ok();
            assert_eq!(page_ok, ok(&from));
            if page_ok {
                m.map(&from);
            }
            let mut any = false;
            // Up to 40 links: page_links takes them 16 at a time.
            let links: Vec<(Vec<u8>, Vec<u8>, bool)> = (0..rng.usize(..40))
                .map(|_| (url(&mut rng), anchor(&mut rng), rng.bool()))
                .collect();
            if rng.bool() {
                // A page's links at once, as the link client writes them.
                fn parts(l: &(Vec<u8>, Vec<u8>, bool)) -> (&[u8], &[u8], bool) {
                    (&l.0, &l.1, l.2)
                }
                let mut refused = 0;
                let written = b.page_links(&from, &links, parts, ts, |_| refused += 1);
                let want = links
                    .iter()
                    .filter(|(to, a, intra)| m.link(&from, to, *intra, ts, a))
                    .count();
                assert_eq!((written, refused), (want, links.len() - want));
                any = written > 0;
            } else {
                for (to, a, intra) in &links {
                    let built = b.link(&from, to, *intra, ts, a).is_ok();
                    assert_eq!(built, m.link(&from, to, *intra, ts, a));
                    any |= built;
                }
            }
            if page_ok && !any {
                b.no_links(&from, ts).unwrap();
                m.no_links(&from, ts);
            }
            let site = url(&mut rng);
            assert_eq!(b.sitemap(&from, &site).is_ok(), m.sitemap(&from, &site));
            if rng.u8(..4) == 0 {
                let class: Vec<Vec<u8>> = (0..rng.usize(1..4)).map(|_| url(&mut rng)).collect();
                let class: Vec<&[u8]> = class.iter().map(Vec::as_slice).collect();
                let doc = if rng.bool() {
                    from.clone()
                } else {
                    url(&mut rng)
                };
                assert_eq!(
                    b.equivalence(&doc, &class, ts).is_ok(),
                    m.equivalence(&doc, &class, ts)
                );
            }
        }
        let want = [
            ("links", &m.links),
            ("urieq", &m.urieq),
            ("eqrepr", &m.eqrepr),
            ("no_links", &m.no_links),
            ("urimap", &m.urimap),
            ("sitemap", &m.sitemap),
        ];
        for (k, v) in want {
            assert_eq!(
                String::from_utf8_lossy(b.field(k)),
                String::from_utf8_lossy(v),
                "round {round}, field {k}"
            );
        }
        assert_eq!(b.lines(), m.lines, "round {round}");
        let bytes: usize = b.fields().iter().map(|(_, v)| v.len()).sum();
        assert_eq!(b.byte_len(), bytes, "round {round}");
    }
}

#[test]
fn a_refused_url_gets_its_field_and_the_url() {
    let mut b = WebAnalyzerBatch::default();
    b.link(b"http://a/", b"http://b/", false, 1, b"x").unwrap();
    // The page hashed last is remembered; a refused target still names the links field.
    assert_eq!(
        b.link(b"http://a/", b"http://b c/", false, 1, b"x"),
        Err(LinkError::BadUrl {
            field: "links",
            url: b"http://b c/".to_vec()
        })
    );
    assert_eq!(
        b.sitemap(b"http://a/", b""),
        Err(LinkError::BadUrl {
            field: "sitemap",
            url: Vec::new()
        })
    );
    assert_eq!(
        b.no_links(b"http://a/\0", 1),
        Err(LinkError::BadUrl {
            field: "no_links",
            url: b"http://a/\0".to_vec()
        })
    );
    // Every byte at or below the space that is not a separator passes.
    for c in 1..=b' ' {
        let u = [b'h', c, b'x'];
        assert_eq!(
            check_url("urimap", &u).is_ok(),
            !matches!(c, b' ' | b'\n' | b'\r'),
            "{c}"
        );
    }
    assert_eq!(b.lines(), 1 + 2);
}

#[test]
fn received_lines_count_every_line_feed() {
    let mut rng = fastrand::Rng::with_seed(0x28_0002);
    for len in [0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200, 4096, 70_000] {
        let field: Vec<u8> = (0..len)
            .map(|_| if rng.u8(..8) == 0 { b'\n' } else { rng.u8(..) })
            .collect();
        let msg = crate::links::Received {
            application: Application::WebAnalyzer,
            collection: b"c"[..].into(),
            fields: vec![
                (b"links"[..].into(), field[..].into()),
                (b"urimap"[..].into(), b"a\nb\n"[..].into()),
            ],
        };
        let want = field.iter().filter(|&&c| c == b'\n').count() + 2;
        assert_eq!(msg.lines(), want, "{len}");
    }
}

/// Writes generated pages (urimap, links, no_links, sitemap, now and then an equivalence) into
/// `b`, as the link client does.
fn write_pages(b: &mut WebAnalyzerBatch, rng: &mut fastrand::Rng, first: &[u8]) {
    for i in 0..rng.usize(1..20) {
        let from = if i == 0 { first.to_vec() } else { url(rng) };
        let ts = 1_700_000_000 + rng.u64(..1000);
        let _ = b.urimap(&from);
        let mut any = false;
        for _ in 0..rng.usize(..8) {
            let (to, a) = (url(rng), anchor(rng));
            any |= b.link(&from, &to, rng.bool(), ts, &a).is_ok();
        }
        if !any {
            let _ = b.no_links(&from, ts);
        }
        let _ = b.sitemap(&from, &url(rng));
        if rng.u8(..4) == 0 {
            let _ = b.equivalence(&from, &[&url(rng)[..], &url(rng)[..]], ts);
        }
        if rng.u8(..8) == 0 {
            let _ = b.delete(&from, ts);
        }
    }
}

#[test]
fn a_cleared_batch_writes_what_a_new_one_writes() {
    let mut rng = fastrand::Rng::with_seed(0x28_0003);
    let mut reused = WebAnalyzerBatch::default();
    for round in 0..300 {
        // The next batch often starts with the document the last one ended with: the memo of
        // the last document hashed (and whether its urimap line is written) must not survive.
        let first = url(&mut rng);
        write_pages(&mut reused, &mut rng, &first);
        reused.clear();
        assert!(reused.is_empty());
        assert_eq!(reused.byte_len(), 0);
        let seed = rng.u64(..);
        let mut fresh = WebAnalyzerBatch::default();
        write_pages(&mut fresh, &mut fastrand::Rng::with_seed(seed), &first);
        write_pages(&mut reused, &mut fastrand::Rng::with_seed(seed), &first);
        assert_eq!(reused.lines(), fresh.lines(), "round {round}");
        assert_eq!(
            Message::webanalyzer(b"c", &reused).to_wire(),
            Message::webanalyzer(b"c", &fresh).to_wire(),
            "round {round}"
        );
    }
}
