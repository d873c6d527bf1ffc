//! The typed view: defaults, the example configuration, wrong types, rules, merge, nodes, ppdup.

use super::*;
use crate::marshal::Value;

const EXAMPLE: &str = include_str!("../../../tests/data/collection-full.xml");
const DOCS: &str = include_str!("../../../docs/collection-config.md");

fn s(x: &str) -> Value<'static> {
    Value::owned_bytes(x.as_bytes().to_vec())
}

fn dict(pairs: Vec<(&str, Value<'static>)>) -> Value<'static> {
    Value::Dict(pairs.into_iter().map(|(k, v)| (s(k), v)).collect())
}

fn list(xs: &[&str]) -> Value<'static> {
    Value::list(xs.iter().map(|x| s(x)).collect())
}

fn from_xml(body: &str) -> Result<CollectionConfig, ConfigError> {
    let xml = format!("<DomainSpecification name=\"c\">{body}</DomainSpecification>");
    let (name, d) = parse_xml(&xml).unwrap().remove(0);
    CollectionConfig::from_dict(&name, &d)
}

fn example() -> (String, Value<'static>) {
    parse_xml(EXAMPLE).unwrap().remove(0)
}

#[test]
fn an_empty_dict_gives_the_defaults() {
    let c = CollectionConfig::from_dict("c", &dict(vec![])).unwrap();
    assert_eq!(c, CollectionConfig::defaults("c"));
    assert_eq!(c.delay, 60.0);
    assert_eq!(c.refresh, 1440.0);
    assert_eq!(c.refresh_mode, RefreshMode::Scratch);
    assert_eq!(c.max_doc_size, 5 << 20);
    assert!(c.robots);
    assert_eq!(c.allowed_schemes, ["http", "https"]);
    assert_eq!(c.allowed_types, ["text/html", "text/plain"]);
    assert_eq!(c.max_depth, None);
    assert_eq!(c.max_sites, 128);
    assert_eq!(c.max_site_connections, 2);
    assert!(c.include_domains.is_empty() && c.exclude_uris.is_empty());
    // Every tag of FSCMT 2.2.2.3.3 except comment.
    assert_eq!(c.link_extraction, 0x50_ffe7);
    assert_eq!(c.link_extraction & 0x10, 0);
    // The default dict says the same thing as the typed defaults.
    assert_eq!(
        CollectionConfig::from_dict("c", &default_dict()).unwrap(),
        CollectionConfig::defaults("c")
    );
    // ... and is a configuration the XML format can carry.
    let xml = to_xml("c", &default_dict()).unwrap();
    assert_eq!(parse_xml(&xml).unwrap()[0].1, default_dict());
}

#[test]
fn the_example_config_reads_as_written() {
    let (name, d) = example();
    let c = CollectionConfig::from_dict(&name, &d).unwrap();
    assert_eq!(c.name, "intranet");
    assert_eq!(
        c.start_uris,
        [
            "http://127.0.0.1:8081/",
            "http://127.0.0.1:8082/docs/index.html"
        ]
    );
    assert_eq!(
        c.start_uri_files,
        ["/var/lib/crawlfleet/intranet-seeds.txt"]
    );
    assert_eq!(c.delay, 0.5);
    assert_eq!(c.refresh, 60.0);
    assert_eq!(c.refresh_mode, RefreshMode::Adaptive);
    assert_eq!(c.max_doc_size, 1 << 20);
    assert_eq!(c.max_sites, 16);
    assert_eq!(c.max_site_connections, 4);
    assert_eq!(c.allowed_schemes, ["http"]);
    assert_eq!(c.max_depth, Some(4));
    assert!(!c.forward_links);
    assert_eq!(c.ppdup_servers, ["127.0.0.1:13000"]);
    assert_eq!(c.ppdup_replicas, ["127.0.0.1:13001"]);
    assert_eq!(
        c.user_agent,
        "crawlfleet-test/1.0 (+http://127.0.0.1:8080/about)"
    );
    // a, frame, meta_refresh on; img, script, comment off; the rest at their defaults.
    let le = c.link_extraction;
    assert_eq!(le & (0x1 | 0x20 | 0x8000), 0x1 | 0x20 | 0x8000);
    assert_eq!(le & (0x80 | 0x800 | 0x10), 0);
    assert_ne!(le & 0x200, 0);

    // The crawl rules.
    assert!(c.allows("http://127.0.0.1:8081/page.html"));
    assert!(c.allows("http://127.0.0.1:8082/docs/a/b"));
    assert!(!c.allows("https://127.0.0.1:8081/"), "https is not allowed");
    assert!(
        !c.allows("http://127.0.0.1:8081/private/x"),
        "excluded prefix"
    );
    assert!(
        !c.allows("http://127.0.0.1:8081/a?x=1&session=9"),
        "excluded regexp"
    );
    assert!(
        !c.allows("http://127.0.0.1:8082/other/"),
        "not in include_uris"
    );
    assert!(
        !c.allows("http://127.0.0.1:8081/photo.JPG"),
        "excluded extension"
    );
    assert!(
        c.allows("http://wiki.intranet.test/start"),
        "suffix domain + regexp uri"
    );
    assert!(!c.allows("http://example.com/"), "not in include_domains");
    assert!(c.allows_type("text/html; charset=utf-8"));
    assert!(c.allows_type("TEXT/plain"));
    assert!(c.allows_type("application/pdf"));
    assert!(!c.allows_type("image/png"));

    // SubDomain, Login, Node.
    assert_eq!(c.subdomains.len(), 1);
    let docs = &c.subdomains[0];
    assert_eq!(
        (docs.name.as_str(), docs.delay, docs.refresh),
        ("docs", Some(0.1), Some(15.0))
    );
    assert_eq!(
        c.subdomain_for("http://127.0.0.1:8082/docs/x")
            .map(|s| &*s.name),
        Some("docs")
    );
    assert!(c.subdomain_for("http://127.0.0.1:8081/").is_none());
    let wiki = &c.logins[0];
    assert_eq!(wiki.site, "127.0.0.1:8081");
    assert_eq!(wiki.action, "POST");
    assert_eq!(
        wiki.parameters,
        [
            ("user".into(), "crawler".into()),
            ("password".into(), "s3cret".into())
        ]
    );
    assert_eq!(wiki.sites, ["127.0.0.1"]);
    assert_eq!(c.nodes[0].name, "node2");

    // Variable delay: Mon-Fri 09-17 at 2 s, Sunday 02-04 suspended, else `delay`.
    assert_eq!(c.delay_at(0, 9), Some(2.0));
    assert_eq!(c.delay_at(4, 16), Some(2.0));
    assert_eq!(c.delay_at(4, 17), Some(0.5));
    assert_eq!(c.delay_at(5, 12), Some(0.5));
    assert_eq!(c.delay_at(6, 3), None);
}

#[test]
fn a_node_element_overrides_the_collection_on_that_node() {
    let (name, d) = example();
    let node2 = CollectionConfig::for_node(&name, &d, "node2").unwrap();
    let node1 = CollectionConfig::for_node(&name, &d, "node1").unwrap();
    assert_eq!(node2.max_sites, 4);
    assert_eq!(node1.max_sites, 16);
    assert_eq!(node2.delay, node1.delay);
}

#[test]
fn wrong_value_types_name_the_parameter() {
    let wrong = |d: Value<'static>, attrib: &str, expected: &'static str, found: &'static str| {
        let e = CollectionConfig::from_dict("c", &d).unwrap_err();
        assert_eq!(
            e,
            ConfigError::WrongType {
                attrib: attrib.into(),
                expected,
                found,
            }
        );
        assert!(e.to_string().contains(attrib), "{e}");
    };
    wrong(dict(vec![("delay", s("60"))]), "delay", "real", "string");
    wrong(
        dict(vec![("max_sites", Value::Float(1.0))]),
        "max_sites",
        "integer",
        "float",
    );
    wrong(
        dict(vec![("robots", list(&["yes"]))]),
        "robots",
        "boolean",
        "list",
    );
    wrong(
        dict(vec![("start_uris", s("http://a/"))]),
        "start_uris",
        "list of strings",
        "string",
    );
    wrong(
        dict(vec![("start_uris", Value::list(vec![Value::int(1)]))]),
        "start_uris",
        "list of strings",
        "int",
    );
    wrong(
        dict(vec![("user_agent", Value::int(1))]),
        "user_agent",
        "UTF-8 string",
        "int",
    );
    wrong(
        dict(vec![("crawlmode", s("FULL"))]),
        "crawlmode",
        "dict",
        "string",
    );
    wrong(
        dict(vec![("crawlmode", dict(vec![("mode", Value::int(3))]))]),
        "crawlmode.mode",
        "UTF-8 string",
        "int",
    );
    wrong(
        dict(vec![("ppdup", dict(vec![("dupservers", s("h:1"))]))]),
        "ppdup.dupservers",
        "list of strings",
        "string",
    );
    let sub = dict(vec![("docs", dict(vec![("delay", s("x"))]))]);
    wrong(
        dict(vec![("subdomains", sub)]),
        "subdomains.docs.delay",
        "real",
        "string",
    );
    wrong(
        dict(vec![("logins", dict(vec![("w", s("x"))]))]),
        "logins.w",
        "dict",
        "string",
    );
    wrong(Value::int(1), "", "dict", "int");
}

#[test]
fn meaningless_values_are_refused() {
    let bad = |body: &str, attrib: &str| {
        let e = from_xml(body).unwrap_err();
        assert!(
            matches!(&e, ConfigError::BadSetting { attrib: a, .. } if a == attrib),
            "{body}: {e:?}"
        );
    };
    bad(
        r#"<attrib name="refresh_mode" type="string">sideways</attrib>"#,
        "refresh_mode",
    );
    bad(
        r#"<attrib name="refresh_mode" type="integer">3</attrib>"#,
        "refresh_mode",
    );
    bad(
        r#"<attrib name="max_sites" type="integer">-1</attrib>"#,
        "max_sites",
    );
    bad(
        r#"<attrib name="max_sites" type="integer">4294967296</attrib>"#,
        "max_sites",
    );
    bad(r#"<attrib name="delay" type="real">-0.5</attrib>"#, "delay");
    // A Login goes to its site's form: without a site it goes nowhere.
    bad(
        r#"<Login name="w"><attrib name="form" type="string">/login</attrib></Login>"#,
        "logins.w.site",
    );
    bad(
        r#"<Login name="w"><attrib name="site" type="string"> </attrib></Login>"#,
        "logins.w.site",
    );
    bad(
        r#"<section name="crawlmode"><attrib name="mode" type="string">DEPTH:x</attrib></section>"#,
        "crawlmode.mode",
    );
    bad(
        r#"<attrib name="include_uris" type="list-string"><member>regexp:(</member></attrib>"#,
        "include_uris",
    );
    bad(
        r#"<section name="exclude_domains"><attrib name="glob" type="list-string"/></section>"#,
        "exclude_domains",
    );
    bad(
        r#"<section name="variable_delay"><attrib name="Someday:1-2" type="real">1</attrib></section>"#,
        "variable_delay.Someday:1-2",
    );
    bad(
        r#"<section name="variable_delay"><attrib name="Mon:5-3" type="real">1</attrib></section>"#,
        "variable_delay.Mon:5-3",
    );
    // A link_extraction key outside the table of FSCMT 2.2.2.3.3 (0x8 is not in it).
    let d = dict(vec![(
        "link_extraction",
        Value::Dict(vec![(Value::int(0x8), Value::int(1))]),
    )]);
    assert!(matches!(
        CollectionConfig::from_dict("c", &d),
        Err(ConfigError::BadSetting { .. })
    ));
}

#[test]
fn refresh_modes_read_as_names_or_fscadm_codes() {
    for m in [
        RefreshMode::Append,
        RefreshMode::Prepend,
        RefreshMode::Scratch,
        RefreshMode::Soft,
        RefreshMode::Adaptive,
    ] {
        let by_name = dict(vec![("refresh_mode", s(&m.name().to_uppercase()))]);
        let by_code = dict(vec![("refresh_mode", Value::int(m.code()))]);
        assert_eq!(
            CollectionConfig::from_dict("c", &by_name)
                .unwrap()
                .refresh_mode,
            m
        );
        assert_eq!(
            CollectionConfig::from_dict("c", &by_code)
                .unwrap()
                .refresh_mode,
            m
        );
    }
    assert_eq!(
        [1, 2, 4, 8, 32].map(|c| RefreshMode::from_code(c).map(RefreshMode::code)),
        [Some(1), Some(2), Some(4), Some(8), Some(32)]
    );
}

#[test]
fn rule_sets_match_exact_prefix_suffix_regexp() {
    let d = RuleSet::parse(
        RuleTarget::Domain,
        &[
            "www.Example.com",
            "exact:a.test",
            "prefix:intra",
            "suffix:.corp.test",
            r"regexp:host[0-9]+\.test",
        ],
    )
    .unwrap();
    assert!(!d.is_empty());
    assert!(
        d.matches("www.example.com"),
        "plain = exact, case-insensitive"
    );
    assert!(d.matches("WWW.EXAMPLE.COM"));
    assert!(!d.matches("www.example.com.evil"));
    assert!(d.matches("a.test") && !d.matches("b.a.test"));
    assert!(d.matches("intranet.local") && !d.matches("my.intranet"));
    assert!(d.matches("x.corp.test") && !d.matches("corp.test.x"));
    assert!(d.matches("host42.test") && d.matches("HOST7.test"));
    assert!(!d.matches("host42.test.evil"), "regexps are anchored");
    assert!(!d.matches("xhost42.test"));

    let u = RuleSet::parse(
        RuleTarget::Uri,
        &[
            "http://a/docs/",
            "exact:http://b/",
            "suffix:.pdf",
            "regexp:.*\\?id=[0-9]+",
        ],
    )
    .unwrap();
    assert!(u.matches("http://a/docs/x"), "plain = prefix for URIs");
    assert!(
        !u.matches("HTTP://A/docs/x"),
        "URI rules are case-sensitive"
    );
    assert!(u.matches("http://b/") && !u.matches("http://b/x"));
    assert!(u.matches("http://c/f.pdf"));
    assert!(u.matches("http://c/p?id=12") && !u.matches("http://c/p?id=12&x"));
    assert_eq!(
        u.rules()[0],
        (RuleKind::Prefix, "http://a/docs/".to_string())
    );

    let empty = RuleSet::empty(RuleTarget::Uri);
    assert!(empty.is_empty() && !empty.matches(""));
    let e = RuleSet::parse(RuleTarget::Uri, &["regexp:a(", "regexp:ok"]).unwrap_err();
    assert_eq!(e.pattern, "a(");
}

#[test]
fn rule_lists_read_from_list_or_section_form() {
    let as_list = from_xml(
        r#"<attrib name="include_domains" type="list-string">
             <member>exact:a.test</member><member>suffix:.b.test</member></attrib>"#,
    )
    .unwrap();
    let as_section = from_xml(
        r#"<section name="include_domains">
             <attrib name="suffix" type="list-string"><member>.b.test</member></attrib>
             <attrib name="exact" type="list-string"><member>a.test</member></attrib>
           </section>"#,
    )
    .unwrap();
    assert_eq!(as_list.include_domains, as_section.include_domains);
    for c in [&as_list, &as_section] {
        assert!(c.allows("http://a.test/") && c.allows("https://x.b.test:8443/p"));
        assert!(!c.allows("http://c.test/"));
    }
}

// FSCADM 2.2.9.3: the keys of a partial configuration replace those of the full one; sections
// merge recursively.
#[test]
fn merge_replaces_keys_and_merges_sections() {
    let (_, base) = example();
    let partial = dict(vec![
        ("delay", Value::Float(5.0)),
        ("crawlmode", dict(vec![("mode", s("FULL"))])),
        (
            "link_extraction",
            Value::Dict(vec![(Value::int(0x80), Value::int(1))]),
        ),
        (
            "subdomains",
            dict(vec![("docs", dict(vec![("delay", Value::Float(9.0))]))]),
        ),
        ("new_key", s("v")),
    ]);
    let merged = merge(&base, &partial);
    let c = CollectionConfig::from_dict("intranet", &merged).unwrap();
    assert_eq!(c.delay, 5.0);
    assert_eq!(c.max_depth, None);
    assert!(!c.forward_links, "crawlmode.fwdlinks kept from base");
    assert_ne!(c.link_extraction & 0x80, 0, "img switched on");
    assert_ne!(c.link_extraction & 0x20, 0, "frame kept");
    assert_eq!(c.subdomains[0].delay, Some(9.0));
    assert_eq!(c.subdomains[0].refresh, Some(15.0), "docs.refresh kept");
    assert_eq!(c.max_sites, 16, "untouched keys stay");
    // Order: base's keys in place, new keys at the end.
    let keys: Vec<_> = merged
        .as_dict()
        .unwrap()
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    let base_keys: Vec<_> = base
        .as_dict()
        .unwrap()
        .iter()
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(keys[..base_keys.len()], base_keys[..]);
    assert_eq!(keys.last(), Some(&s("new_key")));
    // A non-dict on either side: the partial value wins.
    assert_eq!(merge(&Value::int(1), &dict(vec![])), dict(vec![]));
    assert_eq!(merge(&base, &Value::int(2)), Value::int(2));
    // Merging over the defaults fills every missing key (FSCADM 2.2.9.3, new collection).
    let filled = merge(&default_dict(), &dict(vec![("max_sites", Value::int(3))]));
    let c = CollectionConfig::from_dict("n", &filled).unwrap();
    assert_eq!((c.max_sites, c.delay), (3, 60.0));
}

// FSCMT 3.1.5.11 and the 4.5 example: PPDUP_SET_CONFIG carries the ppdup section alone, as
// {collection: section}.
#[test]
fn ppdup_section_is_what_set_config_carries() {
    let xml = r#"<DomainSpecification name="example">
        <attrib name="delay" type="real">1</attrib>
        <section name="ppdup"><attrib name="compact" type="boolean">yes</attrib></section>
      </DomainSpecification>"#;
    let (name, d) = parse_xml(xml).unwrap().remove(0);
    assert_eq!(
        CollectionConfig::ppdup_section(&d),
        dict(vec![("compact", Value::int(1))])
    );
    let data = CollectionConfig::ppdup_set_config_data(&name, &d);
    // The PKT_DATA of the spec's example frame (wire vector PPDUP_SET_CONFIG).
    let hex = "7b73070000006578616d706c657b7307000000636f6d7061637469010000003030";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(crate::marshal::to_bytes(&data), bytes);
    assert_eq!(CollectionConfig::ppdup_section(&dict(vec![])), dict(vec![]));
}

#[test]
fn every_known_attrib_is_documented() {
    for name in KNOWN_ATTRIBS {
        let leaf = name.rsplit('.').next().unwrap_or(name);
        assert!(
            DOCS.contains(&format!("`{name}`")) || DOCS.contains(&format!("`{leaf}`")),
            "{name} is not in docs/collection-config.md"
        );
    }
    for (name, key) in LINK_EXTRACTION {
        assert!(
            DOCS.contains(&format!("`{name}`")),
            "link_extraction {name}"
        );
        assert!(
            DOCS.contains(&format!("0x{key:x}")),
            "link_extraction key {key:#x}"
        );
    }
}
