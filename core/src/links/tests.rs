//! MS-FSWASDR section 4 examples, the CIDHASH vectors, the golden wire vectors, and the log and
//! index.
//!
//! The section 4 text has typing errors that its own hashes and lengths contradict; the tests
//! use what the hashes and the lengths in the hex dump of 4.1.2 prove:
//! - the URLs are `http://www.fourthcoffee.com/...` (4.1.1 writes `http://fourthcoffe.com/` in
//!   `eqrepr` and `urimap`, but the CIDHASHes are those of the `www.fourthcoffee.com` URLs, and
//!   the dump's field lengths count `www.fourthcoffee.com`);
//! - `TMj7tEFgrTGlWETqbY5L5`, `5c9HshqGRoVVma8oX4DPz` and `wGLEKGuSUWctKO5xzzJ7J` (4.1.1 has
//!   `TGLWE`, `Vvma` and `K05` in some places; MD5 and cidhash.tsv agree with these);
//! - the second anchor text is "another example" (4.1.2's `example1` does not fit the dump's
//!   `links` length 0x8b).

use super::*;
use crate::marshal::{self, Value};
use tempfile::TempDir;

const DOC1: &[u8] = b"http://www.fourthcoffee.com/";
const ABOUT: &[u8] = b"http://www.fourthcoffee.com/about.html";
const CONTOSO: &[u8] = b"http://www.contoso.com/";
const ASPX: &[u8] = b"http://www.fourthcoffee.com/index.aspx";
const HTML: &[u8] = b"http://www.fourthcoffee.com/index.html";
const DOC2: &[u8] = b"http://www.fourthcoffee.com/example1.html";

fn test_data(rel: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data")).join(rel)
}

#[test]
fn every_cidhash_vector_matches() {
    let text = std::fs::read_to_string(test_data("cidhash.tsv")).unwrap();
    let mut rows = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (url, want) = line.split_once('\t').unwrap();
        assert_eq!(cidhash(url.as_bytes()).as_str(), want, "{url}");
        assert_eq!(
            CidHash::from_text(want.as_bytes()),
            Some(cidhash(url.as_bytes()))
        );
        rows += 1;
    }
    assert_eq!(rows, 6, "cidhash.tsv changed: review this test");
}

#[test]
fn cidhash_text_is_checked() {
    assert_eq!(CidHash::from_text(b"7fD/x4S22g9fsZM8Kbi3"), None); // 20
    assert_eq!(CidHash::from_text(b"7fD/x4S22g9fsZM8Kbi3+="), None); // 22
    assert_eq!(CidHash::from_text(b"7fD/x4S22g9fsZM8Kbi3 "), None);
}

/// The two documents of 4.1.1 at time `ts`.
fn spec_batch(ts: u64) -> WebAnalyzerBatch {
    let mut b = WebAnalyzerBatch::default();
    b.link(DOC1, ABOUT, true, ts, b"about us").unwrap();
    b.link(DOC1, CONTOSO, false, ts, b"another example")
        .unwrap();
    b.equivalence(DOC1, &[ASPX, HTML], ts).unwrap();
    b.no_links(DOC2, ts).unwrap();
    b
}

#[test]
fn section_4_1_1_lines() {
    let b = spec_batch(1244208852);
    assert_eq!(
        b.field("links"),
        &b"7fD/x4S22g9fsZM8Kbi3+ F73ZPmkvq5reFgsSEa4dA 1 1244208852 about us\n\
           7fD/x4S22g9fsZM8Kbi3+ zcHqC/594P3ec4oHm2hoS 0 1244208852 another example\n"[..]
    );
    assert_eq!(
        b.field("urieq"),
        &b"7fD/x4S22g9fsZM8Kbi3+ TMj7tEFgrTGlWETqbY5L5 1244208852\n\
           7fD/x4S22g9fsZM8Kbi3+ 5c9HshqGRoVVma8oX4DPz 1244208852\n"[..]
    );
    assert_eq!(
        b.field("eqrepr"),
        &b"7fD/x4S22g9fsZM8Kbi3+ http://www.fourthcoffee.com/ 1244208852 \
           http://www.fourthcoffee.com/index.aspx\x00http://www.fourthcoffee.com/index.html\n"[..]
    );
    assert_eq!(
        b.field("no_links"),
        &b"http://www.fourthcoffee.com/example1.html wGLEKGuSUWctKO5xzzJ7J 1244208852\n"[..]
    );
    // 4.1.1 lists doc1's URLs, then doc2's; 4.1.2 sends them together, in this order.
    assert_eq!(
        b.field("urimap"),
        &b"http://www.fourthcoffee.com/ 7fD/x4S22g9fsZM8Kbi3+\n\
           http://www.fourthcoffee.com/about.html F73ZPmkvq5reFgsSEa4dA\n\
           http://www.contoso.com/ zcHqC/594P3ec4oHm2hoS\n\
           http://www.fourthcoffee.com/index.aspx TMj7tEFgrTGlWETqbY5L5\n\
           http://www.fourthcoffee.com/index.html 5c9HshqGRoVVma8oX4DPz\n\
           http://www.fourthcoffee.com/example1.html wGLEKGuSUWctKO5xzzJ7J\n"[..]
    );
    assert_eq!(b.fields().len(), 5);
    assert_eq!(b.lines(), 2 + 2 + 1 + 1 + 6);
}

#[test]
fn section_4_1_2_marshal_layout() {
    // 4.1.2 serializes the message with Python 2's dict order: application, batch (eqrepr,
    // urimap, no_links, links, urieq), collection. Rebuilt in that order, the bytes must give
    // the dump's type codes, keys and lengths (0x8c, 0x158, 0x4b, 0x8b, 0x6e).
    let b = spec_batch(1244209302);
    let order = ["eqrepr", "urimap", "no_links", "links", "urieq"];
    let batch = order
        .iter()
        .map(|k| (Value::bytes(k.as_bytes()), Value::bytes(b.field(k))))
        .collect();
    let dict = Value::Dict(vec![
        (Value::bytes(b"application"), Value::bytes(b"webanalyzer")),
        (Value::bytes(b"batch"), Value::Dict(batch)),
        (Value::bytes(b"collection"), Value::bytes(b"sp")),
    ]);
    let bytes = marshal::to_bytes(&dict);
    let head = b"{s\x0b\x00\x00\x00applications\x0b\x00\x00\x00webanalyzer\
                 s\x05\x00\x00\x00batch{s\x06\x00\x00\x00eqreprs\x8c\x00\x00\x00\
                 7fD/x4S22g9fsZM8Kbi3+ http://www.fourthcoffee.com/ 1244209302 ";
    assert_eq!(&bytes[..head.len()], &head[..]);
    let tail = b"\n0s\x0a\x00\x00\x00collections\x02\x00\x00\x00sp0";
    assert!(bytes.ends_with(tail));
    for (key, len) in [
        ("urimap", 0x158u32),
        ("no_links", 0x4b),
        ("links", 0x8b),
        ("urieq", 0x6e),
    ] {
        let mut pat = vec![b's'];
        pat.extend_from_slice(&(key.len() as u32).to_le_bytes());
        pat.extend_from_slice(key.as_bytes());
        pat.push(b's');
        pat.extend_from_slice(&len.to_le_bytes());
        assert!(
            bytes.windows(pat.len()).any(|w| w == pat),
            "{key} with length {len:#x}"
        );
    }
    // And the message the builder writes holds the same entries.
    let msg = Message::webanalyzer(b"sp", &b);
    let wire = msg.to_wire();
    assert!(wire.ends_with(TERMINATOR));
    let got = parse_message(&wire[..wire.len() - TERMINATOR.len()]).unwrap();
    assert_eq!(got.application, Application::WebAnalyzer);
    assert_eq!(&*got.collection, b"sp");
    for k in order {
        let v = got
            .fields
            .iter()
            .find(|(f, _)| &**f == k.as_bytes())
            .unwrap();
        assert_eq!(&*v.1, b.field(k), "{k}");
    }
}

#[test]
fn section_4_2_1_sprel_lines() {
    let mut b = SprelBatch::default();
    b.uri(DOC1, 1244210475, Operation::Add, &[ASPX, HTML])
        .unwrap();
    b.uri(DOC2, 1244210475, Operation::Del, &[]).unwrap();
    assert_eq!(
        b.uris(),
        &b"http://www.fourthcoffee.com/ 1244210475 ADD http://www.fourthcoffee.com/index.aspx\n\
           http://www.fourthcoffee.com/ 1244210475 ADD http://www.fourthcoffee.com/index.html\n\
           http://www.fourthcoffee.com/example1.html 1244210475 DEL \xc7\x82\n"[..]
    );
    assert_eq!(b.lines(), 3);
}

#[test]
fn duplicate_column_rule_of_2_2_1_3_2_1() {
    let class: &[&[u8]] = &[ASPX, HTML];
    let lines = |op, class: &[&[u8]]| {
        let mut b = SprelBatch::default();
        b.uri(DOC1, 7, op, class).unwrap();
        b.uris().to_vec()
    };
    let empty = |op: &str| format!("http://www.fourthcoffee.com/ 7 {op} \u{1c2}\n").into_bytes();
    assert_eq!(lines(Operation::Del, &[]), empty("DEL"));
    assert_eq!(lines(Operation::Del, class), empty("DEL"));
    assert_eq!(lines(Operation::Add, &[]), empty("ADD"));
    assert_eq!(lines(Operation::UrlSchChange, &[]), empty("URLSCHCHANGE"));
    let two = lines(Operation::UrlSchChange, class);
    assert_eq!(
        two,
        b"http://www.fourthcoffee.com/ 7 URLSCHCHANGE http://www.fourthcoffee.com/index.aspx\n\
          http://www.fourthcoffee.com/ 7 URLSCHCHANGE http://www.fourthcoffee.com/index.html\n"
    );
    // "\u{1c2}" is the two bytes C7 82.
    assert_eq!("\u{1c2}".as_bytes(), EMPTY_DUPLICATE);
}

fn golden(name: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(test_data("wire-vectors.tsv")).unwrap();
    let line = text
        .lines()
        .find(|l| l.split('\t').next() == Some(name))
        .unwrap();
    let hex = line.split('\t').nth(1).unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn builders_reproduce_the_golden_wasdr_vectors() {
    let mut wa = WebAnalyzerBatch::default();
    wa.link_line(
        &cidhash(DOC1),
        &cidhash(ABOUT),
        true,
        1244208852,
        b"about us",
    );
    wa.urimap(DOC1).unwrap();
    assert_eq!(
        Message::webanalyzer(b"sp", &wa).to_wire(),
        golden("WASDR_WEBANALYZER")
    );

    let mut sp = SprelBatch::default();
    sp.uri(DOC1, 1244210475, Operation::Add, &[ASPX]).unwrap();
    sp.uri(DOC2, 1244210475, Operation::Del, &[]).unwrap();
    assert_eq!(
        Message::sharepoint(b"sp", &sp).to_wire(),
        golden("WASDR_SPREL")
    );
    // The size reserved before encoding is the size encoded: a reused wire buffer is never
    // regrown (by doubling, a copy of megabytes) in the middle of a seal.
    for m in [
        Message::webanalyzer(b"sp", &wa),
        Message::sharepoint(b"sp", &sp),
        Message::webanalyzer(b"", &WebAnalyzerBatch::default()),
    ] {
        let wire = m.to_wire();
        assert_eq!(wire.len(), m.encoded_len());
        let mut reused = Vec::with_capacity(8);
        m.encode_into(&mut reused);
        assert_eq!(reused, wire);
        assert_eq!(
            reused.capacity(),
            m.encoded_len(),
            "grown once, to the size"
        );
    }
}

#[test]
fn received_lines_parse_back_into_records() {
    let b = spec_batch(1244208852);
    let wire = Message::webanalyzer(b"sp", &b).to_wire();
    let m = parse_message(&wire[..wire.len() - 7]).unwrap();
    assert_eq!(m.lines(), b.lines());
    let mut recs = Vec::new();
    parse_records(&m, |r| recs.push(r.unwrap()));
    assert_eq!(recs.len(), b.lines());
    assert_eq!(
        recs[1],
        Record::Link {
            from: cidhash(DOC1),
            to: cidhash(CONTOSO),
            intra: false,
            ts: 1244208852,
            anchor: b"another example",
        }
    );
    assert!(recs.contains(&Record::EqRepr {
        doc: cidhash(DOC1),
        url: DOC1,
        ts: 1244208852,
        class: vec![ASPX, HTML],
    }));
    assert!(recs.contains(&Record::NoLinks {
        url: DOC2,
        doc: cidhash(DOC2),
        ts: 1244208852
    }));

    let sp = golden("WASDR_SPREL");
    let m = parse_message(&sp[..sp.len() - 7]).unwrap();
    let mut recs = Vec::new();
    parse_records(&m, |r| recs.push(r.unwrap()));
    assert_eq!(
        recs[1],
        Record::Uri {
            url: DOC2,
            ts: 1244210475,
            op: Operation::Del,
            duplicate: None
        }
    );
}

#[test]
fn bad_messages_and_lines_get_typed_errors() {
    let enc = |v: &Value<'_>| marshal::to_bytes(v);
    assert!(matches!(
        parse_message(b"\xff"),
        Err(LinkError::Unmarshal(_))
    ));
    assert_eq!(
        parse_message(&enc(&Value::int(1))),
        Err(LinkError::NotADict)
    );
    let dict = |app: &[u8], batch: Value<'static>| {
        enc(&Value::Dict(vec![
            (
                Value::bytes(b"application"),
                Value::owned_bytes(app.to_vec()),
            ),
            (Value::bytes(b"collection"), Value::bytes(b"c")),
            (Value::bytes(b"batch"), batch),
        ]))
    };
    assert_eq!(
        parse_message(&dict(b"other", Value::Dict(vec![]))),
        Err(LinkError::UnknownApplication(b"other".to_vec()))
    );
    assert_eq!(
        parse_message(&dict(b"webanalyzer", Value::int(3))),
        Err(LinkError::MissingEntry("batch"))
    );
    assert_eq!(
        parse_message(&dict(
            b"webanalyzer",
            Value::Dict(vec![(Value::bytes(b"links"), Value::int(3))])
        )),
        Err(LinkError::FieldNotString(b"links".to_vec()))
    );
    let bytes = dict(
        b"webanalyzer",
        Value::Dict(vec![(
            Value::bytes(b"links"),
            Value::bytes(b"short 1 2\n7fD/x4S22g9fsZM8Kbi3+ F73ZPmkvq5reFgsSEa4dA 2 5 x\n"),
        )]),
    );
    let m = parse_message(&bytes).unwrap();
    let mut errs = Vec::new();
    parse_records(&m, |r| errs.push(r.unwrap_err()));
    assert_eq!(errs.len(), 2);
    assert!(matches!(
        &errs[1],
        LinkError::BadLine { field: "links", .. }
    ));

    let mut b = WebAnalyzerBatch::default();
    assert!(matches!(
        b.link(DOC1, b"http://a b/", true, 1, b""),
        Err(LinkError::BadUrl { field: "links", .. })
    ));
    assert!(b.no_links(b"", 1).is_err());
    assert!(b.is_empty());
    // A line feed in anchor text would end the line early.
    b.link(DOC1, ABOUT, true, 1, b"two\nlines").unwrap();
    assert!(b.field("links").ends_with(b" 1 1 two lines\n"));
}

/// A scratch directory (removed when the guard drops) and the log's path in it.
fn tmp(name: &str) -> (TempDir, std::path::PathBuf) {
    let d = TempDir::with_prefix(format!("crawlfleet-links-{name}-")).unwrap();
    let p = d.path().join("log");
    (d, p)
}

#[test]
fn log_keeps_committed_messages_and_cuts_a_torn_tail() {
    let (_dir, path) = tmp("torn");
    let (mut log, rec) = LinkLog::open(&path).unwrap();
    assert_eq!(rec, RecoveredLog::default());
    log.append(b"one");
    log.append(b"two");
    assert_eq!(log.pending_messages(), 2);
    log.commit().unwrap();
    let len = log.durable_len();
    drop(log);
    // Half a record, as a crash during a write leaves it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"\x05\x00\x00\x00ab").unwrap();
    drop(f);
    let mut got = Vec::new();
    let r = read_log(&path, |p| got.push(p.to_vec())).unwrap();
    assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
    assert_eq!((r.intact_len, r.torn_bytes), (len, 6));
    let (mut log, r) = LinkLog::open(&path).unwrap();
    assert_eq!(r.messages, 2);
    log.append(b"three");
    log.commit().unwrap();
    let mut got = Vec::new();
    read_log(&path, |p| got.push(p.to_vec())).unwrap();
    assert_eq!(got.len(), 3);
    // A flipped byte ends the log at the record before it.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8 + 3 + 8 + 1] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let mut got = Vec::new();
    read_log(&path, |p| got.push(p.to_vec())).unwrap();
    assert_eq!(got, vec![b"one".to_vec()]);
}

fn index_of(batches: &[WebAnalyzerBatch]) -> LinkIndex {
    let mut b = LinkIndex::builder();
    for batch in batches {
        let wire = Message::webanalyzer(b"c", batch).to_wire();
        b.add_message(&parse_message(&wire[..wire.len() - 7]).unwrap());
    }
    b.finish()
}

#[test]
fn index_answers_inlinks_anchors_outlinks_and_equivalents() {
    let first = spec_batch(100);
    let mut other = WebAnalyzerBatch::default();
    other.link(CONTOSO, ABOUT, false, 100, b"about us").unwrap();
    other.link(CONTOSO, ABOUT, false, 100, b"").unwrap();
    // The first batch sent twice (a retry) adds nothing.
    let ix = index_of(&[first.clone(), other, first]);
    let inl = ix.inlinks(ABOUT);
    assert_eq!(inl.len(), 3);
    assert!(inl
        .iter()
        .any(|l| l.from_url == Some(DOC1) && l.anchor == b"about us"));
    assert_eq!(
        ix.anchors(ABOUT),
        vec![Anchor {
            text: b"about us",
            count: 2
        }]
    );
    let out = ix.outlinks(DOC1);
    assert_eq!(out.len(), 2);
    assert!(out.iter().any(|l| l.to_url == Some(CONTOSO) && !l.intra));
    let eq = ix.equivalents(HTML).unwrap();
    assert_eq!(eq.doc_url, Some(DOC1));
    assert_eq!(eq.repr, vec![ASPX, HTML]);
    assert_eq!(eq.members.len(), 2);
    assert_eq!(ix.equivalents(DOC1), Some(eq));
    assert_eq!(ix.equivalents(CONTOSO), None);
}

#[test]
fn index_keeps_the_newest_run_of_a_document() {
    let mut old = WebAnalyzerBatch::default();
    old.link(DOC1, ABOUT, true, 100, b"old").unwrap();
    let mut new = WebAnalyzerBatch::default();
    new.link(DOC1, CONTOSO, false, 200, b"new").unwrap();
    // Order of arrival does not matter: the newer run wins.
    for ix in [
        index_of(&[old.clone(), new.clone()]),
        index_of(&[new.clone(), old.clone()]),
    ] {
        assert!(ix.inlinks(ABOUT).is_empty());
        assert_eq!(ix.outlinks(DOC1).len(), 1);
        assert_eq!(ix.inlinks(CONTOSO)[0].anchor, b"new");
    }
    let mut gone = WebAnalyzerBatch::default();
    gone.delete(DOC1, 300).unwrap();
    let ix = index_of(&[new.clone(), gone]);
    assert!(ix.outlinks(DOC1).is_empty() && ix.is_deleted(DOC1));
    let mut none = WebAnalyzerBatch::default();
    none.no_links(DOC1, 250).unwrap();
    let ix = index_of(&[new, none]);
    assert!(ix.inlinks(CONTOSO).is_empty());
    assert_eq!(ix.url_of(&cidhash(DOC1)), Some(DOC1));
}
