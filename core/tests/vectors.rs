//! The golden wire vectors (tests/data/wire-vectors.tsv, a copy of shared/vectors) through the typed message model:
//! each FSCMT frame decodes to a typed message, and the typed message encodes back to the exact
//! frame (MS-FSCMT 2.2.1; key order as in the vectors).

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{json::hex_decode, Limits};
use crawlfleet_core::msg::{Command, Message};

fn vectors() -> Vec<(String, Vec<u8>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/wire-vectors.tsv"
    );
    let text = std::fs::read_to_string(path).expect("the golden vectors sit in tests/data");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.split('\t');
            let name = cols.next().unwrap().to_owned();
            (name, hex_decode(cols.next().unwrap()).unwrap())
        })
        .collect()
}

#[test]
fn every_fscmt_vector_round_trips_through_the_typed_model() {
    let limits = Limits::default();
    let mut checked = 0;
    for (name, bytes) in vectors() {
        if name.starts_with("WASDR") {
            continue;
        }
        let (body, used) = frame::split(&bytes, &limits).unwrap().unwrap();
        assert_eq!(used, bytes.len(), "{name}");
        let f = frame::decode_body(body, &limits).unwrap();
        let m = Message::from_dict(&f.message).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The vector's name starts with the command's spec name.
        assert!(
            name.starts_with(m.command().name()),
            "{name} vs {}",
            m.command()
        );
        let mut wire = Vec::new();
        frame::encode_message(&m, f.priority, &mut wire);
        assert_eq!(wire, bytes, "{name} re-encoded from the typed message");
        checked += 1;
    }
    assert_eq!(checked, 13);
}

#[test]
fn urgent_vector_is_high_priority() {
    let limits = Limits::default();
    let (_, bytes) = vectors()
        .into_iter()
        .find(|(n, _)| n == "CMD_UM_URI_URG")
        .unwrap();
    let (body, _) = frame::split(&bytes, &limits).unwrap().unwrap();
    let f = frame::decode_body(body, &limits).unwrap();
    assert_eq!(f.priority, Priority::High);
    let m = Message::from_dict(&f.message).unwrap();
    assert_eq!(m.command(), Command::CmdUmUriUrg);
    let Message::CmdUmUriUrg(u) = m else {
        unreachable!()
    };
    assert_eq!(&u.entry.uri.uri[..], b"http://www.contoso.com/");
    assert_eq!(u.entry.uri.port, Some(80));
    assert_eq!(u.entry.referrer.port, None);
    assert_eq!(u.entry.refresh_cycle, -1);
}
