//! The XML <-> dict mapping of FSCMT 2.2.2.3: types, sections, groups, link_extraction keys,
//! errors with their positions, and round trips.

use super::*;
use crate::marshal::{self, Limits, Value};

const EXAMPLE: &str = include_str!("../../../tests/data/collection-full.xml");

fn s(x: &str) -> Value<'static> {
    Value::owned_bytes(x.as_bytes().to_vec())
}

fn list(xs: &[&str]) -> Value<'static> {
    Value::list(xs.iter().map(|x| s(x)).collect())
}

fn dict(pairs: Vec<(&str, Value<'static>)>) -> Value<'static> {
    Value::Dict(pairs.into_iter().map(|(k, v)| (s(k), v)).collect())
}

fn one(xml: &str) -> (String, Value<'static>) {
    let mut all = parse_xml(xml).unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0)
}

fn spec(body: &str) -> String {
    format!("<CrawlerConfig><DomainSpecification name=\"c\">{body}</DomainSpecification></CrawlerConfig>")
}

fn err(xml: &str) -> ConfigError {
    parse_xml(xml).unwrap_err()
}

// FSCMT 2.2.2.3.2: every attrib type and the data type it maps to.
#[test]
fn every_attrib_type_maps_to_its_data_type() {
    let (name, d) = one(&spec(
        r#"<attrib name="i" type="integer"> -42 </attrib>
        <attrib name="big" type="integer">9007199254740993</attrib>
        <attrib name="s" type="string">  hello &amp; &lt;world&gt; </attrib>
        <attrib name="r" type="real"> 2.5 </attrib>
        <attrib name="r2" type="real">1e-3</attrib>
        <attrib name="yes" type="boolean"> yes </attrib>
        <attrib name="no" type="boolean">no</attrib>
        <attrib name="t" type="boolean">TRUE</attrib>
        <attrib name="f" type="boolean">0</attrib>
        <attrib name="l" type="list-string">
          <member> http://127.0.0.1/ </member>
          <member>b</member>
          <member/>
          <!-- comments may stand between members -->
        </attrib>
        <attrib name="empty_list" type="list-string"/>
        <attrib name="empty_string" type="string"/>"#,
    ));
    assert_eq!(name, "c");
    assert_eq!(
        d,
        dict(vec![
            ("i", Value::int(-42)),
            ("big", Value::int(9007199254740993)),
            ("s", s("hello & <world>")),
            ("r", Value::Float(2.5)),
            ("r2", Value::Float(0.001)),
            ("yes", Value::int(1)),
            ("no", Value::int(0)),
            ("t", Value::int(1)),
            ("f", Value::int(0)),
            ("l", list(&["http://127.0.0.1/", "b", ""])),
            ("empty_list", list(&[])),
            ("empty_string", s("")),
        ])
    );
}

#[test]
fn white_space_from_references_and_cdata_is_kept() {
    let (_, d) = one(&spec(
        r#"<attrib name="a" type="string"> &#32;x&#9; </attrib>
        <attrib name="b" type="string"><![CDATA[ <raw> ]]></attrib>
        <attrib name="c" type="string">line1
line2</attrib>"#,
    ));
    assert_eq!(d.get(b"a"), Some(&s(" x\t")));
    assert_eq!(d.get(b"b"), Some(&s(" <raw> ")));
    assert_eq!(d.get(b"c"), Some(&s("line1\nline2")));
}

// FSCMT 2.2.2.3.1: section is a dict keyed by its name; sections nest.
#[test]
fn sections_nest_into_dicts() {
    let (_, d) = one(&spec(
        r#"<attrib name="top" type="integer">1</attrib>
        <section name="outer">
          <attrib name="x" type="string">X</attrib>
          <section name="inner">
            <attrib name="y" type="real">1.5</attrib>
            <section name="empty"/>
          </section>
        </section>"#,
    ));
    let inner = dict(vec![("y", Value::Float(1.5)), ("empty", dict(vec![]))]);
    let outer = dict(vec![("x", s("X")), ("inner", inner)]);
    assert_eq!(d, dict(vec![("top", Value::int(1)), ("outer", outer)]));
}

#[test]
fn a_repeated_name_replaces_the_value_in_place() {
    let (_, d) = one(&spec(
        r#"<attrib name="a" type="integer">1</attrib>
        <attrib name="b" type="integer">2</attrib>
        <attrib name="a" type="integer">3</attrib>"#,
    ));
    assert_eq!(d, dict(vec![("a", Value::int(3)), ("b", Value::int(2))]));
}

// FSCMT 2.2.2.3.1: SubDomain, Login and Node elements gather into "subdomains", "logins" and
// "nodes", keyed by their name attributes.
#[test]
fn subdomain_login_node_gather_into_their_dicts() {
    let (_, d) = one(&spec(
        r#"<attrib name="delay" type="real">1.0</attrib>
        <SubDomain name="docs"><attrib name="delay" type="real">0.5</attrib></SubDomain>
        <Login name="wiki">
          <attrib name="site" type="string">127.0.0.1:8081</attrib>
          <section name="parameters"><attrib name="user" type="string">u</attrib></section>
        </Login>
        <SubDomain name="news">
          <attrib name="include_uris" type="list-string"><member>http://a/</member></attrib>
        </SubDomain>
        <Node name="node1"><attrib name="max_sites" type="integer">4</attrib></Node>
        <Node name="node2"/>"#,
    ));
    let expected = dict(vec![
        ("delay", Value::Float(1.0)),
        (
            "subdomains",
            dict(vec![
                ("docs", dict(vec![("delay", Value::Float(0.5))])),
                ("news", dict(vec![("include_uris", list(&["http://a/"]))])),
            ]),
        ),
        (
            "logins",
            dict(vec![(
                "wiki",
                dict(vec![
                    ("site", s("127.0.0.1:8081")),
                    ("parameters", dict(vec![("user", s("u"))])),
                ]),
            )]),
        ),
        (
            "nodes",
            dict(vec![
                ("node1", dict(vec![("max_sites", Value::int(4))])),
                ("node2", dict(vec![])),
            ]),
        ),
    ]);
    assert_eq!(d, expected);
}

// FSCMT 2.2.2.3.3: every link_extraction name becomes its integer key; booleans are 1/0.
#[test]
fn every_link_extraction_name_maps_to_its_integer_key() {
    let table: [(&str, i64); 17] = [
        ("a", 0x1),
        ("action", 0x2),
        ("area", 0x4),
        ("card", 0x400000),
        ("comment", 0x10),
        ("embed", 0x100000),
        ("frame", 0x20),
        ("go", 0x40),
        ("img", 0x80),
        ("layer", 0x100),
        ("link", 0x200),
        ("meta", 0x400),
        ("meta_refresh", 0x8000),
        ("object", 0x4000),
        ("script", 0x800),
        ("script_java", 0x1000),
        ("style", 0x2000),
    ];
    let body: String = table
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
            let v = if i % 2 == 0 { "yes" } else { "no" };
            format!("<attrib name=\"{n}\" type=\"boolean\">{v}</attrib>")
        })
        .collect();
    let (_, d) = one(&spec(&format!(
        "<section name=\"link_extraction\">{body}</section>"
    )));
    let le = d.get(b"link_extraction").unwrap().as_dict().unwrap();
    assert_eq!(le.len(), 17);
    for (i, ((name, key), (k, v))) in table.iter().zip(le).enumerate() {
        assert_eq!(k, &Value::int(*key), "{name}");
        assert_eq!(v, &Value::int(i64::from(i % 2 == 0)), "{name}");
        assert_eq!(link_extraction_key(name), Some(*key as u32));
        assert_eq!(link_extraction_name(*key), Some(*name));
    }
    // Only the link_extraction section maps names; a section of another name keeps them.
    let (_, d) = one(&spec(
        r#"<section name="other"><attrib name="a" type="boolean">yes</attrib></section>"#,
    ));
    assert_eq!(d.get(b"other"), Some(&dict(vec![("a", Value::int(1))])));
}

#[test]
fn several_domain_specifications_come_in_document_order() {
    let xml = r#"<?xml version="1.0"?>
<!DOCTYPE CrawlerConfig>
<CrawlerConfig>
  <DomainSpecification name="b"><attrib name="x" type="integer">1</attrib></DomainSpecification>
  <!-- between -->
  <DomainSpecification name="a"/>
</CrawlerConfig>"#;
    let all = parse_xml(xml).unwrap();
    assert_eq!(
        all,
        vec![
            ("b".to_string(), dict(vec![("x", Value::int(1))])),
            ("a".to_string(), dict(vec![])),
        ]
    );
    // A bare DomainSpecification is a document too.
    let bare = r#"<DomainSpecification name="solo"><attrib name="x" type="string">y</attrib></DomainSpecification>"#;
    assert_eq!(one(bare), ("solo".to_string(), dict(vec![("x", s("y"))])));
}

fn at(line: usize, column: usize) -> Position {
    Position { line, column }
}

#[test]
fn malformed_xml_is_refused_with_its_position() {
    let xml = "<CrawlerConfig>\n  <DomainSpecification name=\"c\">\n    <attrib name=\"a\" type=\"string\">x</attrb>\n";
    let e = err(xml);
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
    assert_eq!(e.position(), Some(at(3, 37)), "{e}");
    assert!(
        e.to_string().starts_with("line 3, column 37: XML syntax: "),
        "{e}"
    );

    // Unclosed elements at the end of the document.
    let e = err("<CrawlerConfig>\n<DomainSpecification name=\"c\">\n");
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
    assert_eq!(e.position().map(|p| p.line), Some(3), "{e}");

    // An attribute without quotes.
    let e = err("<CrawlerConfig>\n <DomainSpecification name=c/>\n</CrawlerConfig>");
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
    assert_eq!(e.position().map(|p| p.line), Some(2), "{e}");

    // No root element at all; an unknown entity.
    assert!(matches!(err("  "), ConfigError::Syntax { .. }));
    let e = err(&spec(r#"<attrib name="a" type="string">&nbsp;</attrib>"#));
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
}

#[test]
fn unknown_type_is_refused_with_its_position() {
    let xml = "<CrawlerConfig>\n<DomainSpecification name=\"c\">\n      <attrib name=\"x\" type=\"float\">1.0</attrib>\n</DomainSpecification></CrawlerConfig>";
    let e = err(xml);
    assert_eq!(
        e,
        ConfigError::UnknownType {
            pos: at(3, 7),
            type_name: "float".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "line 3, column 7: unknown attrib type \"float\""
    );
}

#[test]
fn a_value_not_of_its_type_is_refused_with_its_position() {
    let xml = "<DomainSpecification name=\"c\">\n  <attrib name=\"max_sites\" type=\"integer\">\n     12x </attrib>\n</DomainSpecification>";
    assert_eq!(
        err(xml),
        ConfigError::BadValue {
            pos: at(3, 6),
            attrib: "max_sites".into(),
            type_name: "integer",
            value: "12x".into(),
        }
    );
    // Columns count characters, not bytes.
    let xml = "<DomainSpecification name=\"c\"><!-- é --><attrib name=\"r\" type=\"real\">abc</attrib></DomainSpecification>";
    assert_eq!(err(xml).position(), Some(at(1, 70)));
    for (ty, v) in [
        ("integer", "1.5"),
        ("integer", ""),
        ("integer", "99999999999999999999"),
        ("real", "nan"),
        ("real", "inf"),
        ("real", "1,5"),
        ("boolean", "maybe"),
    ] {
        let e = err(&spec(&format!(
            "<attrib name=\"v\" type=\"{ty}\">{v}</attrib>"
        )));
        assert!(
            matches!(&e, ConfigError::BadValue { type_name, value, .. } if *type_name == ty && value == v),
            "{ty} {v:?}: {e:?}"
        );
    }
}

#[test]
fn unknown_link_extraction_name_is_refused_with_its_position() {
    let xml = "<DomainSpecification name=\"c\">\n<section name=\"link_extraction\">\n  <attrib name=\"a\" type=\"boolean\">yes</attrib>\n  <attrib name=\"applet\" type=\"boolean\">yes</attrib>\n</section></DomainSpecification>";
    let e = err(xml);
    assert_eq!(
        e,
        ConfigError::UnknownLinkTag {
            pos: at(4, 3),
            name: "applet".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "line 4, column 3: unknown link_extraction name \"applet\""
    );
}

#[test]
fn missing_name_attribute_is_refused_with_its_position() {
    let cases = [
        ("<CrawlerConfig>\n <DomainSpecification>\n</DomainSpecification></CrawlerConfig>", "DomainSpecification", "name", at(2, 2)),
        ("<DomainSpecification name=\"c\">\n\n   <attrib type=\"string\">x</attrib></DomainSpecification>", "attrib", "name", at(3, 4)),
        ("<DomainSpecification name=\"c\"><attrib name=\"x\">x</attrib></DomainSpecification>", "attrib", "type", at(1, 31)),
        ("<DomainSpecification name=\"c\">\n<section><attrib name=\"x\" type=\"string\"/></section></DomainSpecification>", "section", "name", at(2, 1)),
        ("<DomainSpecification name=\"c\">\n  <SubDomain/></DomainSpecification>", "SubDomain", "name", at(2, 3)),
        ("<DomainSpecification name=\"c\">\n  <Login></Login></DomainSpecification>", "Login", "name", at(2, 3)),
        ("<DomainSpecification name=\"c\">\n  <Node/></DomainSpecification>", "Node", "name", at(2, 3)),
    ];
    for (xml, element, attribute, pos) in cases {
        assert_eq!(
            err(xml),
            ConfigError::MissingAttribute {
                pos,
                element: element.into(),
                attribute
            },
            "{xml}"
        );
    }
    assert_eq!(
        err(cases[0].0).to_string(),
        "line 2, column 2: <DomainSpecification> has no \"name\" attribute"
    );
}

#[test]
fn elements_and_text_out_of_place_are_refused() {
    let e = err("<Config/>");
    assert_eq!(
        e,
        ConfigError::UnexpectedElement {
            pos: at(1, 1),
            element: "Config".into(),
            parent: String::new()
        }
    );
    // SubDomain only at the top of a DomainSpecification.
    let e = err(&spec(
        r#"<section name="s"><SubDomain name="x"/></section>"#,
    ));
    assert!(
        matches!(e, ConfigError::UnexpectedElement { ref element, .. } if element == "SubDomain"),
        "{e:?}"
    );
    // Elements inside a scalar attrib; members only in list-string.
    let e = err(&spec(r#"<attrib name="x" type="string"><b/></attrib>"#));
    assert!(matches!(e, ConfigError::UnexpectedElement { .. }), "{e:?}");
    let e = err(&spec(
        r#"<attrib name="x" type="list-string">loose<member>a</member></attrib>"#,
    ));
    assert!(matches!(e, ConfigError::UnexpectedText { .. }), "{e:?}");
    let e = err(&spec(
        r#"<attrib name="x" type="list-string"><item>a</item></attrib>"#,
    ));
    assert!(matches!(e, ConfigError::UnexpectedElement { .. }), "{e:?}");
    let e = err(&spec("text between elements"));
    assert!(matches!(e, ConfigError::UnexpectedText { .. }), "{e:?}");
    // The link_extraction section holds attribs only.
    let e = err(&spec(
        r#"<section name="link_extraction"><section name="a"/></section>"#,
    ));
    assert!(
        matches!(e, ConfigError::UnexpectedElement { ref element, .. } if element == "section"),
        "{e:?}"
    );
    // Two root elements.
    let e = err("<DomainSpecification name=\"a\"/><DomainSpecification name=\"b\"/>");
    assert!(matches!(e, ConfigError::UnexpectedElement { .. }), "{e:?}");
    // A section that would collide with the SubDomain dict.
    let e = err(&spec(r#"<section name="subdomains"/>"#));
    assert!(
        matches!(e, ConfigError::ReservedName { ref name, .. } if name == "subdomains"),
        "{e:?}"
    );
}

#[test]
fn sections_nested_too_deep_are_refused() {
    let depth = xml::MAX_SECTION_DEPTH;
    let ok = format!(
        "{}{}",
        "<section name=\"s\">".repeat(depth),
        "</section>".repeat(depth)
    );
    assert!(parse_xml(&spec(&ok)).is_ok());
    let deep = format!(
        "{}{}",
        "<section name=\"s\">".repeat(depth + 1),
        "</section>".repeat(depth + 1)
    );
    assert!(matches!(err(&spec(&deep)), ConfigError::Syntax { .. }));
}

#[test]
fn example_config_round_trips_through_xml_and_marshal() {
    let all = parse_xml(EXAMPLE).unwrap();
    assert_eq!(all.len(), 1);
    let (name, d) = &all[0];
    assert_eq!(name, "intranet");
    let le = d.get(b"link_extraction").unwrap();
    assert_eq!(le.as_dict().unwrap()[0], (Value::int(1), Value::int(1)));
    let xml = to_xml(name, d).unwrap();
    assert_eq!(parse_xml(&xml).unwrap(), all, "{xml}");
    assert_marshal_round_trip(d);
}

/// The dict goes over the wire as PKT_DSPEC: marshal encode + decode gives it back unchanged.
fn assert_marshal_round_trip(d: &Value<'_>) {
    let bytes = marshal::to_bytes(d);
    let back = marshal::from_bytes(&bytes, &Limits::default()).unwrap();
    assert_eq!(&back, d);
}

#[test]
fn to_xml_writes_what_parse_xml_reads() {
    let d = dict(vec![
        ("s", s(" lead and trail\t")),
        ("markup", s("<a href=\"x\">&amp;</a>\r\n")),
        ("uni", s("blåbærsyltetøy ✓")),
        ("n", Value::int(i64::MIN)),
        ("r", Value::Float(1e-300)),
        ("l", list(&["", " x ", "\n"])),
        ("weird key\twith tab", Value::int(1)),
    ]);
    let xml = to_xml("name with \"quotes\" & <brackets>", &d).unwrap();
    let back = parse_xml(&xml).unwrap();
    assert_eq!(
        back,
        vec![("name with \"quotes\" & <brackets>".to_string(), d)],
        "{xml}"
    );
    // Booleans are written as `boolean` and come back as the integers FSCMT 2.2.2.3.2 uses.
    let xml = to_xml("c", &dict(vec![("robots", Value::Bool(false))])).unwrap();
    assert!(
        xml.contains(r#"<attrib name="robots" type="boolean">no</attrib>"#),
        "{xml}"
    );
    assert_eq!(one(&xml).1, dict(vec![("robots", Value::int(0))]));
}

#[test]
fn to_xml_refuses_what_xml_cannot_carry() {
    let bad = [
        ("none", Value::None),
        ("nan", Value::Float(f64::NAN)),
        ("ctl", s("a\u{1}b")),
        ("raw", Value::owned_bytes(vec![0xff, 0xfe])),
        ("nested", Value::list(vec![list(&["a"])])),
        ("subdomains", list(&["a"])),
        ("link_extraction", dict(vec![("a", Value::int(1))])),
    ];
    for (k, v) in bad {
        let e = to_xml("c", &dict(vec![(k, v)])).unwrap_err();
        assert!(
            matches!(&e, ConfigError::NotRepresentable { key, .. } if key.starts_with(k)),
            "{k}: {e:?}"
        );
    }
    let e = to_xml("c", &Value::int(1)).unwrap_err();
    assert!(matches!(e, ConfigError::NotRepresentable { .. }));
    let int_key = Value::Dict(vec![(Value::int(3), Value::int(1))]);
    assert!(to_xml("c", &int_key).is_err());
}

/// Random strings over an alphabet with every character the escaping has to handle.
fn random_string(max: usize) -> String {
    const CHARS: &[char] = &[
        'a', 'Z', '0', ' ', '\t', '\n', '\r', '<', '>', '&', '"', '\'', ';', '#', 'é', '✓', '🦀',
        ':', '/', ']',
    ];
    (0..fastrand::usize(0..=max))
        .map(|_| CHARS[fastrand::usize(..CHARS.len())])
        .collect()
}

fn random_value(depth: usize) -> Value<'static> {
    match fastrand::u8(0..if depth < 3 { 6 } else { 4 }) {
        0 => Value::int(fastrand::i64(..)),
        1 => loop {
            let f = f64::from_bits(fastrand::u64(..));
            if f.is_finite() {
                break Value::Float(f);
            }
        },
        2 => s(&random_string(12)),
        3 => Value::list(
            (0..fastrand::usize(0..4))
                .map(|_| s(&random_string(8)))
                .collect(),
        ),
        4 => random_params(depth + 1, false),
        _ => {
            // A link_extraction section: a random subset of FSCMT 2.2.2.3.3 keys, 1 or 0.
            let pairs = LINK_EXTRACTION
                .iter()
                .filter(|_| fastrand::bool())
                .map(|(_, k)| {
                    (
                        Value::int(i64::from(*k)),
                        Value::int(i64::from(fastrand::bool())),
                    )
                })
                .collect();
            Value::Dict(pairs)
        }
    }
}

fn random_params(depth: usize, top: bool) -> Value<'static> {
    let mut pairs: Vec<(Value<'static>, Value<'static>)> = Vec::new();
    for _ in 0..fastrand::usize(0..6) {
        let v = random_value(depth);
        let is_link = v
            .as_dict()
            .is_some_and(|d| d.iter().any(|(k, _)| k.as_i64().is_some()));
        let key = if is_link {
            "link_extraction".to_string()
        } else {
            random_string(6)
        };
        let reserved = ["subdomains", "logins", "nodes", "link_extraction"];
        if (!is_link && reserved.contains(&key.as_str()))
            || pairs
                .iter()
                .any(|(k, _)| k.as_bytes() == Some(key.as_bytes()))
        {
            continue;
        }
        pairs.push((s(&key), v));
    }
    if top {
        for group in ["subdomains", "logins", "nodes"] {
            if fastrand::bool() {
                let mut members: Vec<(Value<'static>, Value<'static>)> = Vec::new();
                for _ in 0..fastrand::usize(1..3) {
                    let n = random_string(5);
                    if !members
                        .iter()
                        .any(|(k, _)| k.as_bytes() == Some(n.as_bytes()))
                    {
                        members.push((s(&n), random_params(depth + 1, false)));
                    }
                }
                let at = fastrand::usize(0..=pairs.len());
                pairs.insert(at, (s(group), Value::Dict(members)));
            }
        }
    }
    Value::Dict(pairs)
}

#[test]
fn random_dicts_round_trip_through_xml_and_marshal() {
    fastrand::seed(0x2223);
    for round in 0..500 {
        let name = random_string(10);
        let d = random_params(0, true);
        let xml = to_xml(&name, &d).unwrap();
        let back = parse_xml(&xml).unwrap_or_else(|e| panic!("round {round}: {e}\n{xml}"));
        assert_eq!(back, vec![(name, d.clone())], "round {round}\n{xml}");
        assert_marshal_round_trip(&d);
    }
}

#[test]
fn position_counts_lines_and_characters() {
    let t = "ab\ncdé\nf";
    assert_eq!(Position::of_offset(t, 0), at(1, 1));
    assert_eq!(Position::of_offset(t, 3), at(2, 1));
    assert_eq!(Position::of_offset(t, 7), at(2, 4)); // after the two-byte é
    assert_eq!(Position::of_offset(t, 6), at(2, 3)); // inside é: its start
    assert_eq!(Position::of_offset(t, 99), at(3, 2));
}

/// Configurations arrive over XML-RPC: no input makes the parser panic. Every truncation of the
/// example and random single-character damage to it gives a value or a refusal with a position.
#[test]
fn damaged_documents_are_refused_not_panicked_on() {
    let mut cut = 0;
    while cut < EXAMPLE.len() {
        if EXAMPLE.is_char_boundary(cut) {
            if let Err(e) = parse_xml(&EXAMPLE[..cut]) {
                assert!(e.position().is_some(), "{e}");
            }
        }
        cut += 7;
    }
    fastrand::seed(0xc0f1);
    let chars: Vec<char> = EXAMPLE.chars().collect();
    let noise = ['<', '>', '/', '"', '&', ';', '=', ' ', 'x', '\u{0}'];
    for _ in 0..800 {
        let mut damaged = chars.clone();
        let i = fastrand::usize(..damaged.len());
        damaged[i] = noise[fastrand::usize(..noise.len())];
        let text: String = damaged.into_iter().collect();
        if let Err(e) = parse_xml(&text) {
            assert!(e.position().is_some(), "{e}");
        }
    }
}

#[test]
fn characters_xml_does_not_allow_are_refused() {
    // Found by the collection fuzz target's round trip: a control character (raw, or as a
    // reference) was taken into a string that to_xml then refused to write back.
    for bad in [
        spec(r#"<attrib name="user_agent" type="string">a&#1;b</attrib>"#),
        spec("<attrib name=\"user_agent\" type=\"string\">a\u{1}b</attrib>"),
        spec("<attrib name=\"start_uris\" type=\"list-string\"><member><![CDATA[\u{FFFF}]]></member></attrib>"),
        r#"<DomainSpecification name="a&#31;"/>"#.to_string(),
    ] {
        match err(&bad) {
            ConfigError::Syntax { message, .. } => {
                assert!(message.contains("not allowed in XML 1.0"), "{message}")
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn an_attrib_named_like_a_group_is_refused_at_the_top() {
    // Found by the collection fuzz target: `<attrib name="subdomains">` at the top was taken as
    // a list, which to_xml could not write back (the name stands for the SubDomain elements).
    // A section of that name was refused already; inside a section the names are free.
    for name in ["subdomains", "logins", "nodes"] {
        let xml = spec(&format!(
            r#"<attrib name="{name}" type="list-string"><member>x</member></attrib>"#
        ));
        match err(&xml) {
            ConfigError::ReservedName { name: n, .. } => assert_eq!(n, name),
            other => panic!("{name}: {other:?}"),
        }
        let inner = spec(&format!(
            r#"<section name="s"><attrib name="{name}" type="integer">1</attrib></section>"#
        ));
        let (_, dict) = one(&inner);
        assert_eq!(to_xml("c", &dict).map(|x| one(&x).1), Ok(dict));
    }
}

/// The host of a URI as the collection rules read it, byte by byte, is what the string
/// splitting it replaced gives, on URIs of every shape (user info, ports, IPv6, no authority,
/// no scheme, `://` later in the URI, non-ASCII).
#[test]
fn host_of_reads_the_authority_as_splitting_did() {
    fn reference(uri: &str) -> &str {
        let Some((_, rest)) = uri.split_once("://") else {
            return "";
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if let Some(v6) = hostport.strip_prefix('[') {
            return v6.split(']').next().unwrap_or("");
        }
        hostport.split(':').next().unwrap_or("")
    }
    let uris = [
        "http://www.contoso.com/a/b.html",
        "http://www.contoso.com",
        "https://User:pw@Host.Example:8443/x?y#z",
        "http://a@b@c.example:1/",
        "http://[::1]:8080/p",
        "http://[fe80::1/x",
        "http://host?q=http://other/",
        "http://host#frag",
        "mailto:someone@example.com",
        "no-scheme/path?x=http://h.example/",
        "://",
        "",
        "http://",
        "http://:80/",
        "http://bücher.example/ä",
        "ftp://x.example:21",
        "http://h.example:81/dir/page.html",
    ];
    for u in uris {
        assert_eq!(super::parts::host_of(u), reference(u), "{u}");
    }
    let mut rng = fastrand::Rng::with_seed(28);
    let alphabet = b":/?#@[]ab.1";
    for _ in 0..20_000 {
        let n = rng.usize(0..16);
        let u: String = (0..n)
            .map(|_| alphabet[rng.usize(0..alphabet.len())] as char)
            .collect();
        assert_eq!(super::parts::host_of(&u), reference(&u), "{u}");
    }
}

/// A rule set's matches, with the exact patterns in a hash set, equal the plain reading of its
/// rules one by one (every rule compared in order, domains lower-cased first), on generated
/// sets of every kind and generated hosts and URIs.
#[test]
fn rule_sets_match_as_their_rules_read_one_by_one() {
    use super::rules::{RuleKind, RuleSet, RuleTarget};
    fn reference(set: &RuleSet, s: &str) -> bool {
        let s = match set.target() {
            RuleTarget::Domain => s.to_ascii_lowercase(),
            _ => s.to_string(),
        };
        set.rules().iter().any(|(k, p)| match k {
            RuleKind::Exact => s == *p,
            RuleKind::Prefix => s.starts_with(p.as_str()),
            RuleKind::Suffix => s.ends_with(p.as_str()),
            RuleKind::Regexp => regex::RegexBuilder::new(&format!("^(?:{p})$"))
                .case_insensitive(set.target() == RuleTarget::Domain)
                .build()
                .unwrap()
                .is_match(&s),
        })
    }
    let mut rng = fastrand::Rng::with_seed(28);
    let words = ["a", "B", "ex", "Example", ".", "/", "com", "1", "x/y", "é"];
    let word = |rng: &mut fastrand::Rng, n: usize| -> String {
        (0..n).map(|_| words[rng.usize(..words.len())]).collect()
    };
    for _ in 0..400 {
        let target = if rng.bool() {
            RuleTarget::Domain
        } else {
            RuleTarget::Uri
        };
        let mut rules: Vec<(RuleKind, String)> = Vec::new();
        for _ in 0..rng.usize(..12) {
            let kind = RuleKind::ALL[rng.usize(..3)];
            let n = rng.usize(1..4);
            rules.push((kind, word(&mut rng, n)));
        }
        if rng.bool() {
            rules.push((RuleKind::Regexp, "a.*m".to_string()));
        }
        let set = RuleSet::from_rules(target, rules).unwrap();
        for _ in 0..50 {
            let n = rng.usize(..5);
            let s = word(&mut rng, n);
            assert_eq!(set.matches(&s), reference(&set, &s), "{set:?} on {s:?}");
        }
    }
}

/// A page's links written with its scheme and authority share its host: the crawl engine asks
/// the host rules once for the page and gives their verdict to `refusal_known_domain`, which
/// must refuse each such link exactly as `refusal` does, the order of the rules (scheme,
/// extension, host, URI) included.
#[test]
fn a_known_host_verdict_refuses_as_the_host_rules_do() {
    let mut cfg = CollectionConfig::defaults("c");
    cfg.include_domains = RuleSet::parse(RuleTarget::Domain, &["a.com", "suffix:.b.org"]).unwrap();
    cfg.exclude_domains = RuleSet::parse(RuleTarget::Domain, &["x.b.org"]).unwrap();
    cfg.exclude_uris = RuleSet::parse(RuleTarget::Uri, &["regexp:.*/excluded/.*"]).unwrap();
    cfg.exclude_exts = vec![".zip".to_string()];
    let mut seen = [0usize; 5];
    for scheme in ["http://", "ftp://"] {
        for auth in [
            "a.com",
            "a.com:8080",
            "u@a.com",
            "y.b.org",
            "x.b.org",
            "c.net",
        ] {
            let page = format!("{scheme}{auth}/p.html");
            let refused = cfg.domain_refused(&page);
            for tail in [
                "",
                "/",
                "/q.html",
                "/f.zip",
                "/excluded/x",
                "/excluded/f.zip",
                "?a#b",
            ] {
                let link = format!("{scheme}{auth}{tail}");
                let want = cfg.refusal(&link);
                assert_eq!(cfg.refusal_known_domain(&link, refused), want, "{link}");
                seen[match want {
                    None => 0,
                    Some(Refusal::Scheme) => 1,
                    Some(Refusal::Extension) => 2,
                    Some(Refusal::Domain) => 3,
                    Some(Refusal::Uri | Refusal::Recursion) => 4,
                }] += 1;
            }
        }
    }
    // Every verdict was reached.
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

/// `max_uri_recursion` (docs/collection-config.md): a path whose one segment repeats more than
/// the setting's times is taken for a loop and refused (URI skip code `ur`, MS-FSCADM 2.2.3.1);
/// the query and fragment do not count, and 0 turns the check off.
#[test]
fn a_path_segment_repeated_past_max_uri_recursion_is_refused() {
    let mut cfg = CollectionConfig::defaults("c");
    assert_eq!(cfg.max_uri_recursion, 5);
    let refused = |cfg: &CollectionConfig, u: &str| cfg.refusal(u) == Some(Refusal::Recursion);
    for ok in [
        "http://h.example/a/a/a/a/a/x.html",
        "http://h.example/a/b/a/b/a/b/a/b/a/b/",
        "http://h.example/1/2/3/4/5/6/7/8/9/10/11/12",
        "http://h.example/x?/a/a/a/a/a/a/a",
        "http://h.example/x#/a/a/a/a/a/a/a",
        "http://h.example",
        "http://h.example?q=/a/a/a/a/a/a/a",
        "http://h.example#/a/a/a/a/a/a/a",
    ] {
        assert!(!refused(&cfg, ok), "{ok}");
    }
    for looping in [
        "http://h.example/a/a/a/a/a/a/x.html",
        "http://h.example/a/b/a/b/a/b/a/b/a/b/a/b/",
        "https://h.example:8443/cal/2026/cal/2027/cal/2028/cal/2029/cal/2030/cal/2031?q",
    ] {
        assert!(refused(&cfg, looping), "{looping}");
    }
    // A path of 50,000 distinct segments is read in one pass (a page may hold such a link).
    let long: String = (0..50_000).map(|i| format!("/s{i}")).collect();
    assert!(!refused(&cfg, &format!("http://h.example{long}")));
    assert!(refused(
        &cfg,
        &format!("http://h.example{long}{}", "/s7".repeat(5))
    ));
    cfg.max_uri_recursion = 0;
    assert!(cfg.allows("http://h.example/a/a/a/a/a/a/a/a/a/a/a/a"));
    cfg.max_uri_recursion = 1;
    assert!(refused(&cfg, "http://h.example/a/b/a"));
    assert!(!refused(&cfg, "http://h.example/a/b/c"));
}

/// variable_delay periods are read on the node's UTC clock: weekday from 1970-01-01, a
/// Thursday, and the hour of the day.
#[test]
fn variable_delay_periods_are_read_on_the_utc_clock() {
    use crate::config::VariableDelay;
    let mut cfg = CollectionConfig::defaults("c");
    cfg.delay = 10.0;
    assert_eq!(cfg.delay_now(0), Some(10.0), "no periods: the delay");
    let period = |first_day, last_day, from_hour, to_hour, delay| VariableDelay {
        first_day,
        last_day,
        from_hour,
        to_hour,
        delay,
    };
    cfg.variable_delay = vec![
        // Monday 09-17: 2 s; Sunday 23-24: suspended; Thursday 0-1: 0.5 s.
        period(0, 0, 9, 17, Some(2.0)),
        period(6, 6, 23, 24, None),
        period(3, 3, 0, 1, Some(0.5)),
    ];
    // 1970-01-01 00:00 UTC, a Thursday.
    assert_eq!(cfg.delay_now(0), Some(0.5));
    assert_eq!(cfg.delay_now(3_600), Some(10.0));
    // 2026-12-07 10:30 UTC, a Monday.
    assert_eq!(cfg.delay_now(1_796_639_400), Some(2.0));
    assert_eq!(cfg.delay_now(1_796_639_400 + 7 * 3_600), Some(10.0));
    // 2026-12-06 23:59 UTC, a Sunday.
    assert_eq!(cfg.delay_now(1_796_601_540), None);
    assert_eq!(cfg.delay_now(1_796_601_540 + 60), Some(10.0));
}
