//! What the `collection` fuzz target asserts about any input. Shared by the fuzz target
//! (fuzz_targets/collection.rs) and tests/fuzz_corpus.rs, which replays the corpus through it.

use crawlfleet_core::config::{self, CollectionConfig};

/// Panics when any invariant fails for `data`, taken as a collection configuration document
/// (`<CrawlerConfig>` of FSCMT 2.2.2.3): every DomainSpecification it yields is written back by
/// `to_xml` to a document that parses to the same name and dict, and the typed configuration
/// built from that dict (or its refusal) is the same from both.
pub fn check(data: &[u8]) {
    let Ok(xml) = std::str::from_utf8(data) else {
        return;
    };
    let specs = match config::parse_xml(xml) {
        Ok(specs) => specs,
        Err(e) => {
            // Every refusal can be shown, with its position within the document.
            let _ = e.to_string();
            if let Some(p) = e.position() {
                assert!(p.line >= 1 && p.column >= 1, "{p:?}");
            }
            return;
        }
    };
    for (name, dict) in &specs {
        assert!(
            dict.as_dict().is_some(),
            "{name}: a collection's parameters are a dict"
        );
        let written = config::to_xml(name, dict)
            .unwrap_or_else(|e| panic!("{name}: to_xml refuses what parse_xml gave: {e}"));
        let back = config::parse_xml(&written).unwrap_or_else(|e| {
            panic!("{name}: parse_xml refuses what to_xml wrote: {e}\n{written}")
        });
        assert_eq!(
            back,
            [(name.clone(), dict.clone())],
            "round trip through\n{written}"
        );
        let typed = CollectionConfig::from_dict(name, dict);
        let typed_back = CollectionConfig::from_dict(name, &back[0].1);
        assert_eq!(typed.is_ok(), typed_back.is_ok());
        match (&typed, &typed_back) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            _ => unreachable!(),
        }
        // What the schedulers take: the typed configuration, defaults where the dict is refused.
        let shared = config::parsed(name.as_bytes(), dict);
        match typed {
            Ok(t) => assert_eq!(*shared, t),
            Err(_) => assert_eq!(*shared, CollectionConfig::defaults(name)),
        }
    }
}
